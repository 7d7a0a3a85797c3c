"""What the fuzz runner and its schemathesis hooks share: the harness's view of the controller under test, and the
password login that keeps the harness's admin session alive.

The runner (``run.py``) starts the controller, prepares it and hands a :class:`Harness` to each schemathesis process
through the ``TOLLGATE_FUZZ_HARNESS`` environment variable; the hooks (``hooks.py``) read it back.

The harness logs in from its own loopback address (:data:`HARNESS_SOURCE_ADDRESS`), not the fuzzer's 127.0.0.1: the
controller throttles wrong passwords per client address, and the fuzzer's guesses must not make the harness wait.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

__all__ = ["ENV_VAR", "HARNESS_SOURCE_ADDRESS", "MANAGEMENT", "Harness", "LoginFailed", "admin_client", "log_in"]

ENV_VAR = "TOLLGATE_FUZZ_HARNESS"
MANAGEMENT = "/edge/management/v1"
# Any 127.0.0.0/8 address reaches a controller bound to 127.0.0.1 on Linux; this one is the harness's alone.
HARNESS_SOURCE_ADDRESS = "127.0.0.2"
_REQUEST_TIMEOUT = 30.0
# How long a login keeps retrying while the controller answers 429 RATE_LIMITED (it says how long in Retry-After).
_THROTTLED_LOGIN_PATIENCE = 90.0


class LoginFailed(RuntimeError):
    """The harness's admin could not log in: the run cannot go on with a session."""


@dataclass(frozen=True)
class Harness:
    """The controller under test and the rows the harness depends on.

    Attributes:
        origin: ``http://127.0.0.1:PORT``.
        username, password: the default admin's credentials.
        admin_id: the default admin's identity id.
        admin_policy_id: the auth policy the default admin logs in under.
        redirects: collection (``authenticators``, ``auth-policies``) -> the id of a row the harness's login depends
            on -> the id of a decoy of the same kind that fuzzed requests naming the row address instead (see
            ``hooks.py``). Empty for runs that cannot reach those rows.
        decoy_identity_id: the identity that takes a fuzzed change of the default admin's auth policy.
    """

    origin: str
    username: str
    password: str
    admin_id: str = ""
    admin_policy_id: str = ""
    redirects: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    decoy_identity_id: str = ""

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Harness:
        """The harness the runner described in :data:`ENV_VAR`.

        Raises:
            KeyError: the variable is not set (the hooks were loaded outside ``run.py``).
        """
        values: dict[str, Any] = json.loads((os.environ if environ is None else environ)[ENV_VAR])
        return cls(**values)


def _transport() -> httpx.HTTPTransport:
    return httpx.HTTPTransport(local_address=HARNESS_SOURCE_ADDRESS)


def log_in(harness: Harness) -> str:
    """A fresh API session token of the default admin.

    Waits out 429 RATE_LIMITED answers (as their ``Retry-After`` says) for up to ``_THROTTLED_LOGIN_PATIENCE``
    seconds in all.

    Raises:
        LoginFailed: any other answer than 200, or throttled for too long.
    """
    deadline = time.monotonic() + _THROTTLED_LOGIN_PATIENCE
    with httpx.Client(transport=_transport(), timeout=_REQUEST_TIMEOUT) as client:
        while True:
            reply = client.post(f"{harness.origin}{MANAGEMENT}/authenticate", params={"method": "password"},
                                json={"username": harness.username, "password": harness.password})
            if reply.status_code == 200:
                token: str = reply.json()["data"]["token"]
                return token
            wait = float(reply.headers.get("Retry-After", "1"))
            if reply.status_code != 429 or time.monotonic() + wait > deadline:
                raise LoginFailed(f"admin login answered {reply.status_code}: {reply.text[:300]}")
            time.sleep(wait)


def admin_client(harness: Harness) -> httpx.Client:
    """An HTTP client on the management API with a fresh admin session (the caller closes it)."""
    return httpx.Client(base_url=f"{harness.origin}{MANAGEMENT}", transport=_transport(), timeout=_REQUEST_TIMEOUT,
                        headers={"zt-session": log_in(harness)})
