"""Drive the OpenZiti C SDK (PyPI ``openziti==0.6.0``, libziti 0.29.3) against a controller, for the end-to-end test.

``python sdk_driver.py JWT_FILE IDENTITY_FILE SERVICE [--posture-wait S] [--deadline S]`` enrols from the JWT
(writing the identity, mode 0600), loads it (libziti authenticates with the certificate, lists services and starts
sending posture), waits for the posture responses, dials SERVICE, and exits. Each stage prints one JSON line on
stdout; libziti logs to stderr (``ZITI_LOG``).

libziti hangs instead of failing in several cases (a JWT or TLS failure during enrolment, no service to list), so
every SDK call runs in a thread joined with a deadline, and a watchdog ends the process with ``os._exit`` (never
waiting for a thread stuck inside libziti). Exit status: 0 when every stage ran (a failed dial is data, not a
failure), 3 enrolment failed, 4 load failed, 10 a stage or the watchdog ran out of time.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_STARTED = time.monotonic()


def emit(stage: str, **fields: Any) -> None:
    print(json.dumps({"stage": stage, "t": round(time.monotonic() - _STARTED, 3), **fields}), flush=True)


def finish(status: int) -> None:
    sys.stdout.flush()
    os._exit(status)


def within(stage: str, seconds: float, call: Callable[[], Any]) -> Any:
    """``call()`` in a daemon thread; the process ends (status 10) when it takes longer than ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except Exception as exc:  # reported as data: the test reads the stage lines
            box["error"] = repr(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        emit(stage, error="timeout", seconds=seconds)
        finish(10)
    if "error" in box:
        emit(stage, error=box["error"])
        finish(3 if stage == "enrol" else 4)
    return box["value"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("jwt")
    parser.add_argument("identity")
    parser.add_argument("service")
    parser.add_argument("--posture-wait", type=float, default=3.0)
    parser.add_argument("--deadline", type=float, default=45.0)
    args = parser.parse_args()
    os.environ.pop("ZITI_IDENTITIES", None)  # importing openziti would load (and wait for) every one listed
    watchdog = threading.Timer(args.deadline, lambda: (emit("watchdog", error="timeout"), finish(10)))
    watchdog.daemon = True
    watchdog.start()

    from openziti import zitilib

    with open(args.jwt, "rb") as handle:
        token = handle.read().strip()

    def enroll() -> tuple[int, str | None]:
        zitilib.init()
        out, length = ctypes.c_char_p(), ctypes.c_size_t()
        status = zitilib._ziti_enroll(token, None, None, ctypes.byref(out), ctypes.byref(length))
        return status, out.value.decode() if status == 0 and out.value else None

    status, identity = within("enrol", 20, enroll)
    if status != 0 or identity is None:
        emit("enrol", error="failed", code=status)
        finish(3)
    fd = os.open(args.identity, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(identity)
    leaf = json.loads(identity)["id"]["cert"].split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    emit("enrolled", cert_sha1=hashlib.sha1(ssl.PEM_cert_to_DER_cert(leaf)).hexdigest())

    def load() -> tuple[Any, int]:
        context = zitilib.load(os.path.abspath(args.identity))
        return context, zitilib._ziti_lasterr()  # the error is per thread: read it in the calling one

    context, error = within("load", 30, load)
    if not context:
        emit("load", error="failed", code=error)
        finish(4)
    emit("loaded")
    time.sleep(args.posture_wait)  # OS, MAC and DOMAIN responses go about a second after login

    def dial() -> tuple[int, int]:
        socket_fd = zitilib.ziti_socket(socket.SOCK_STREAM)
        status = zitilib._ziti_connect(socket_fd, context, args.service.encode(), None)
        return status, zitilib._ziti_lasterr() if status != 0 else 0

    status, error = within("dial", 20, dial)
    emit("dial", status=status, code=error, message=zitilib.errorstr(error) if error < 0 else "")
    emit("done")
    finish(0)


if __name__ == "__main__":
    main()
