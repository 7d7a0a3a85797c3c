"""What every enrolment method shares: the request it gets and the answer it gives, the enrollment claimed (consumed)
in the enrolment's own write, the time certificates are issued at, and the refusal of a certificate already in use.

``enrollment.py`` dispatches on the enrollment's method; ``ca_enrollment.py`` and ``router_enrollment.py`` carry
out theirs with these pieces.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from controller.clock import Clock, parse_time
from controller.data.write_path import delete_row
from controller.errors import ApiError
from controller.model.spec import WriteContext
from controller.resources.enrollments import TOKEN_DIGEST

__all__ = ["Enrolled", "EnrollmentRequest", "claim", "issue_time", "refuse_certificate_in_use"]


@dataclass(frozen=True, slots=True)
class EnrollmentRequest:
    """What a client sent to an enrolment route.

    Attributes:
        token: the enrollment token (query ``token`` or the body's ``token``); None when absent.
        raw: the body when it is not JSON (a PEM or DER CSR), else None.
        json: the body when it is JSON (an object), else None.
        certificate: the TLS client certificate of the connection, if any.
    """

    token: str | None
    raw: bytes | None = None
    json: Mapping[str, Any] | None = None
    certificate: x509.Certificate | None = None


@dataclass(frozen=True, slots=True)
class Enrolled:
    """What an enrolment answers: certificates as PEM (None when the method issues none)."""

    cert: str | None = None
    server_cert: str | None = None
    ca: str | None = None

    def data(self) -> dict[str, str]:
        """The answer's ``data`` (the reference's enrollmentCerts, absent fields left out)."""
        fields = {"cert": self.cert, "serverCert": self.server_cert, "ca": self.ca}
        return {name: value for name, value in fields.items() if value is not None}


def issue_time(clock: Clock) -> dt.datetime:
    """The controller's current time, as certificate issuing takes it."""
    return dt.datetime.fromtimestamp(clock.now(), dt.UTC)


def claim(ctx: WriteContext, found: Mapping[str, Any], methods: tuple[str, ...]) -> dict[str, Any]:
    """Inside the enrolment's write: the enrollment ``found`` by its token before the write, still outstanding
    with the same token, deleted (consumed).

    Raises:
        ApiError: 400 INVALID_ENROLLMENT_TOKEN when it is gone (consumed meanwhile, or its subject deleted), was
            refreshed meanwhile (a new token) or is not of one of ``methods``; 400 ENROLLMENT_EXPIRED when it has
            expired.
    """
    row = ctx.txn.get("enrollments", found["id"])
    if row is None or row.get(TOKEN_DIGEST) != found[TOKEN_DIGEST] or row.get("method") not in methods:
        raise ApiError("INVALID_ENROLLMENT_TOKEN")
    if parse_time(row["expiresAt"]) <= ctx.now:
        raise ApiError("ENROLLMENT_EXPIRED")
    delete_row(ctx, ctx.registry["enrollments"], row["id"])
    return row


def refuse_certificate_in_use(ctx: WriteContext, print_: str) -> None:
    """409 CERT_IN_USE when a cert authenticator already holds the certificate of fingerprint ``print_``."""
    if ctx.txn.by_unique("authenticators", "fingerprint", print_) is not None:
        raise ApiError("CERT_IN_USE", {"message": "the certificate is already in use", "data": {"fingerprint": print_}})
