"""The running controller renews its TLS server certificate without a restart.

``serve_controller`` (controller/runtime/task_tree.py's whole task tree, its renewal service included:
``start_controller`` of tests/support.py does not start that one) runs on a real TLS socket, on Trio's virtual clock,
which the controller's wall clock follows from the real time of its start. The certificate seeded at the start of the
test lives a year, so its renewal comes about 335 virtual days later. What a client sees is read through real TLS
handshakes against the listening socket: while the sockets talk, the clock's autojump is off, so virtual time stands
still and no server timeout can fire early; the client runs in a worker thread and its socket bounds the wait in real
time.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import socket
import ssl
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import jwt
import pytest
import trio
import trio.testing
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from trio.testing import MockClock

from controller.certificates.issuing import BACKDATE, fingerprint
from controller.certificates.pki import RENEW_BEFORE
from controller.runtime.certificate_renewal import RETRY_SECONDS, renew_at
from controller.runtime.composition import Controller
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, make_settings, seed_pki, virtual_time_stands_still
from tests.support import serving as serving_controller
from web.app import create_app

CLIENT_ROOT = ""  # /enroll/jwks and /enroll/challenge are served at the root, as the SDKs call them

# OpenSSL's X509_V_FLAG_NO_CHECK_TIME: the client checks the chain and the host name but not the dates, which the
# virtual clock puts months ahead of the real one. The dates are asserted against the virtual clock instead.
_NO_CHECK_TIME = 0x200000
SERVER_VALIDITY = dt.timedelta(days=365)


@dataclass
class Served:
    """The controller ``serve_controller`` runs, and the port its TLS listener is bound to."""

    controller: Controller
    port: int

    @property
    def certificate_file(self) -> Path:
        return self.controller.pki.server_cert_path

    def wall_deadline(self, wall: float) -> float:
        """The Trio deadline of the wall-clock instant ``wall`` (epoch seconds) on the controller's clock."""
        return self.controller.clock.to_trio(wall)


@asynccontextmanager
async def serving(data_dir: Path) -> AsyncIterator[Served]:
    """Run ``serve_controller`` over TLS on a free loopback port until the block ends, then shut it down."""
    seed_pki(data_dir)
    async with serving_controller(make_settings(data_dir, tls=True, host="127.0.0.1", port=0)) as (controller, urls):
        port = urlsplit(urls[0]).port
        assert port is not None
        yield Served(controller, port)


def _presented_certificate(port: int, ca_file: Path) -> x509.Certificate:
    """Connect, complete a TLS handshake that verifies the chain to ``ca_file`` and the name ``localhost``, and
    return the leaf certificate the server presented. Blocking, with a 10 s socket timeout."""
    context = ssl.create_default_context(cafile=str(ca_file))
    context.verify_flags |= _NO_CHECK_TIME
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


async def presented_certificate(served: Served, clock: MockClock) -> x509.Certificate:
    """The server certificate a new TLS connection to the controller's listener is given now."""
    with virtual_time_stands_still(clock):
        return await trio.to_thread.run_sync(_presented_certificate, served.port, served.controller.pki.ca_cert_path)


def leaf_on_disk(served: Served) -> x509.Certificate:
    """The leaf of ``server.pem`` (the file hypercorn and a restarted controller load), checking the CA follows."""
    leaf, ca = x509.load_pem_x509_certificates(served.certificate_file.read_bytes())
    assert ca == served.controller.pki.ca_cert
    return leaf


async def settle_at(served: Served, wall: float) -> None:
    """Sleep until the wall-clock instant ``wall``, then let every task due then run before returning."""
    deadline = served.wall_deadline(wall)
    await trio.sleep_until(deadline)
    await trio.testing.wait_all_tasks_blocked()  # wakes before any autojump: the clock stays at the instant
    assert abs(trio.current_time() - deadline) < 1e-6  # float rounding only


async def assert_renewed_at_instant(served: Served, clock: MockClock,
                                    current: x509.Certificate) -> x509.Certificate:
    """Nothing changes up to ``renew_at``; one second later the renewal is done. Returns the new certificate."""
    controller = served.controller
    instant = renew_at(controller)
    assert instant == (current.not_valid_after_utc - RENEW_BEFORE).timestamp()

    await settle_at(served, instant)
    assert controller.pki.server_cert == current
    assert leaf_on_disk(served) == current
    assert await presented_certificate(served, clock) == current

    await settle_at(served, instant + 1)
    renewed = controller.pki.server_cert
    moment = dt.datetime.fromtimestamp(controller.clock.now(), dt.UTC)
    assert renewed.serial_number != current.serial_number
    assert renewed.public_key() == current.public_key()
    # Issued at the renewal instant for a year (certificate times are whole seconds).
    assert renewed.not_valid_before_utc == (moment - BACKDATE).replace(microsecond=0)
    assert renewed.not_valid_after_utc == (moment + SERVER_VALIDITY).replace(microsecond=0)
    assert renewed.not_valid_after_utc > current.not_valid_after_utc
    renewed.verify_directly_issued_by(controller.pki.ca_cert)
    assert leaf_on_disk(served) == renewed
    assert await presented_certificate(served, clock) == renewed
    # JWTs are signed with the same key from now on; the key id and the published chain name the new certificate.
    assert controller.jwts.signer.kid == fingerprint(renewed)
    x5c = controller.jwts.signer.jwks()["keys"][0]["x5c"]
    assert base64.b64decode(x5c[0]) == renewed.public_bytes(serialization.Encoding.DER)
    return renewed


async def test_the_running_controller_renews_its_server_certificate(tmp_path: Path,
                                                                    autojump_clock: MockClock) -> None:
    async with serving(tmp_path) as served:
        controller = served.controller
        first = controller.pki.server_cert
        key_file = controller.pki.server_key_path.read_bytes()
        signed_before = controller.jwts.ca("ca-of-before")
        assert await presented_certificate(served, autojump_clock) == first

        second = await assert_renewed_at_instant(served, autojump_clock, first)
        assert controller.pki.server_key_path.read_bytes() == key_file
        # A JWT signed before the renewal still verifies with the key the controller publishes now.
        published = jwt.PyJWK(controller.jwts.signer.jwks()["keys"][0])
        assert jwt.decode(signed_before, published, algorithms=[controller.jwts.signer.algorithm])["sub"] == \
            "ca-of-before"

        # The service re-arms for the renewed certificate: the next renewal comes a year minus RENEW_BEFORE later.
        first_renewal = controller.clock.now()
        await assert_renewed_at_instant(served, autojump_clock, second)
        between = controller.clock.now() - first_renewal
        assert abs(between - (SERVER_VALIDITY - RENEW_BEFORE).total_seconds()) <= 1  # whole-second cert times


async def test_jwts_signed_before_a_renewal_stay_verifiable_and_new_ones_name_the_new_certificate(
        tmp_path: Path, autojump_clock: MockClock) -> None:
    async with serving(tmp_path) as served:
        controller = served.controller
        admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
        identity_id = await admin.create("/identities", {"name": "laptop", "type": "Device", "isAdmin": False,
                                                         "enrollment": {"ott": True}})

        async def enrollment_jwt() -> str:
            detail = (await admin.get(f"/identities/{identity_id}")).data
            return str(detail["enrollment"]["ott"]["jwt"])

        before = await enrollment_jwt()
        old_kid = jwt.get_unverified_header(before)["kid"]
        await settle_at(served, renew_at(controller) + 1)
        admin = await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)  # months later: the first session has expired
        new_kid = controller.jwts.signer.kid
        assert new_kid != old_kid and controller.jwts.signer.kids == {new_kid, old_kid}

        # The enrollment's JWT is signed again with the new certificate's key id (no stale cached one).
        after = await enrollment_jwt()
        assert jwt.get_unverified_header(after)["kid"] == new_kid
        # Both key ids are published, and the JWT signed before verifies with the key published under its id.
        keys = (await admin.get("/enroll/jwks", base=CLIENT_ROOT)).body["keys"]
        assert [k["kid"] for k in keys] == [new_kid, old_kid]
        old_key = jwt.PyJWK(next(k for k in keys if k["kid"] == old_kid))
        assert jwt.decode(before, old_key, algorithms=[controller.jwts.signer.algorithm],
                          options={"verify_aud": False, "verify_exp": False})["sub"] == identity_id
        # A nonce challenge naming the old key id is still answered.
        challenge = await admin.post("/enroll/challenge", {"nonce": str(uuid.uuid4()), "keyId": old_kid},
                                     base=CLIENT_ROOT)
        assert challenge.status == 200, challenge.body


async def test_renewal_near_the_cas_end_is_retried_daily(tmp_path: Path, autojump_clock: MockClock,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """In the CA's last RENEW_BEFORE a renewed certificate ends with the CA and is due again at once: the service
    retries once a day, logging an error each time, instead of renewing in a loop."""
    caplog.set_level(logging.INFO, "tollgate")
    async with serving(tmp_path) as served:
        controller = served.controller
        ca_end = controller.pki.ca_cert.not_valid_after_utc.timestamp()
        window_start = ca_end - 10 * 86_400
        await settle_at(served, window_start)
        caplog.clear()
        await settle_at(served, window_start + 3 * RETRY_SECONDS)
        renewed = [r for r in caplog.records if r.getMessage() == "server certificate renewed"]
        errors = [r for r in caplog.records if r.levelname == "ERROR" and "beyond the CA's expiry" in r.getMessage()]
        assert len(renewed) == 3 and len(errors) == 3
        assert controller.pki.server_cert.not_valid_after_utc == controller.pki.ca_cert.not_valid_after_utc
