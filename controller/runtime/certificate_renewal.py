"""Server certificate renewal while the controller runs.

The server certificate lives a year; :func:`~controller.certificates.pki.ensure_pki` re-issues it at a start within
:data:`~controller.certificates.pki.RENEW_BEFORE` of its expiry. A controller that runs for longer than that
renews it itself: one task sleeps until that instant (a deadline, no polling), re-issues the certificate from the CA
(the key stays, so JWTs already signed stay valid), and loads it into the live TLS contexts, which present it from
the next handshake on.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging

import trio

from controller.certificates.pki import RENEW_BEFORE, ensure_pki
from controller.certificates.signing import TokenSigner
from controller.runtime.composition import Controller

__all__ = ["RETRY_SECONDS", "renew_at", "renew_server_certificate"]

RETRY_SECONDS = 86_400.0
"""How often renewal is tried while the CA itself is within ``RENEW_BEFORE`` of its expiry."""

log = logging.getLogger("tollgate")


def renew_at(controller: Controller) -> float:
    """The wall-clock instant (epoch seconds) at which the current server certificate is renewed."""
    expires = controller.pki.server_cert.not_valid_after_utc
    return float((expires - RENEW_BEFORE).timestamp())


async def renew_server_certificate(controller: Controller, *,
                                   task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Renew the server certificate each time it comes within ``RENEW_BEFORE`` of its expiry, until cancelled.

    A certificate never outlives the CA that issues it: in the CA's own last ``RENEW_BEFORE``, a renewed
    certificate is already due again, so renewal is then tried once a day, each time logging an error, instead of
    over and over.
    """
    task_status.started()
    settings = controller.settings
    due = renew_at(controller)
    while True:
        # A second past the instant, so that the rule "within RENEW_BEFORE of expiry" holds whatever the rounding.
        await trio.sleep_until(controller.clock.to_trio(due + 1))
        moment = dt.datetime.fromtimestamp(controller.clock.now(), dt.UTC)
        # A node of a cluster keeps the network's server key, whatever it was told.
        key_type = settings.server_key_type if controller.cluster is None else controller.cluster.server_key_type
        issue = functools.partial(ensure_pki, settings.data_dir / "pki", settings.sans, server_key_type=key_type,
                                  now=moment)
        pki = await trio.to_thread.run_sync(issue) if settings.worker_threads else issue()
        controller.pki = pki
        controller.jwts.signer = TokenSigner.from_pki(pki, renewing=controller.jwts.signer)
        controller.tls.load_server_certificate(pki.server_cert_path, pki.server_key_path)
        log.info("server certificate renewed", extra={"notAfter": pki.server_cert.not_valid_after_utc.isoformat()})
        due = renew_at(controller)
        if due + 1 <= controller.clock.now():
            log.error("the server certificate cannot be renewed beyond the CA's expiry; replace the CA",
                      extra={"caNotAfter": pki.ca_cert.not_valid_after_utc.isoformat()})
            due = controller.clock.now() + RETRY_SECONDS
