"""API-session certificates: the client certificates an API session may connect to edge routers with.

Each row holds one certificate tied to one API session: one the controller issued for a CSR on the Client API's
``/current-api-session/certificates``, or the client's own certificate of a certificate login. The rows die with
their API session (``on_delete="cascade"``). The kind has no generic routes: the Client API serves a session's own
certificates under ``/current-api-session/certificates`` (``web/routes/session_certificate_routes.py``), so rows are
shown with links of that path and without the session id, as the reference's ``currentApiSessionCertificateDetail``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography import x509

from controller.certificates.issuing import certificate_pem, fingerprint
from controller.clock import format_time
from controller.data.present import link
from controller.data.write_path import create_row
from controller.model.field import CREATE_ONLY, Field, string_field
from controller.model.spec import Hooks, ReadContext, Resource, WriteContext
from storage.zitiql import FieldType

__all__ = ["API_SESSION_CERTIFICATES", "CREATE_SCHEMA", "KIND", "PATH", "record_session_certificate"]

KIND = "api-session-certificates"
"""The storage kind of API-session certificates."""

PATH = "current-api-session/certificates"
"""Where the Client API serves the caller's certificates, relative to its base path (``_links`` point there)."""

CREATE_SCHEMA: dict[str, Any] = {"type": "object", "required": ["csr"], "properties": {"csr": {"type": "string"}}}
"""The body of ``POST /current-api-session/certificates``: a PEM certificate signing request."""

_DATE_TIME = {"type": "string", "format": "date-time"}


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    # Only the session's own holder ever sees a row, so the session it belongs to goes without saying.
    out.pop("apiSessionId", None)
    out["_links"] = {"self": link(f"{PATH}/{row['id']}")}


API_SESSION_CERTIFICATES = Resource(
    kind=KIND, singular="apiSessionCertificate", op_name="CurrentApiSessionCertificate",
    op_plural="CurrentApiSessionCertificates", tag="Current API Session", body_name="sessionCertificate",
    fields=(
        string_field("apiSessionId", writable=CREATE_ONLY, ref="api-sessions", on_delete="cascade"),
        string_field("subject", writable=CREATE_ONLY),  # RFC 4514, most specific attribute first
        string_field("fingerprint", writable=CREATE_ONLY),
        Field("validFrom", _DATE_TIME, writable=CREATE_ONLY, filter=FieldType.DATETIME),
        Field("validTo", _DATE_TIME, writable=CREATE_ONLY, filter=FieldType.DATETIME),
        string_field("certificate", writable=CREATE_ONLY, filterable=False),  # PEM
    ),
    # Rows are written by the certificate rules (controller/authentication/session_certificates.py) and read only
    # through the caller's own session, never through the generic routes.
    operations=frozenset(),
    hooks=Hooks(present=_present),
    # A certificate put out of force (an extended one) takes its API-session certificates with it.
    indexes=(("fingerprint",),),
)


def record_session_certificate(ctx: WriteContext, api_session_id: str, certificate: x509.Certificate) -> dict[str, Any]:
    """Store ``certificate`` as one of an API session's certificates, in the caller's write.

    Args:
        ctx: the write; the API session's row must exist in it (it may have been created by the same write).
        api_session_id: the session the certificate is bound to.
        certificate: any X.509 certificate (issued by the controller or brought by the client).

    Returns:
        The stored row: ``apiSessionId``, ``subject`` (RFC 4514), ``fingerprint`` (hex SHA-1 of the DER),
        ``validFrom`` / ``validTo`` (the certificate's notBefore / notAfter, formatted as every timestamp) and
        ``certificate`` (PEM), besides the common fields.

    Raises:
        FieldError: 400 COULD_NOT_VALIDATE on ``apiSessionId`` when no such API session exists.
    """
    body = {
        "apiSessionId": api_session_id,
        "subject": certificate.subject.rfc4514_string(),
        "fingerprint": fingerprint(certificate),
        "validFrom": format_time(certificate.not_valid_before_utc.timestamp()),
        "validTo": format_time(certificate.not_valid_after_utc.timestamp()),
        "certificate": certificate_pem(certificate),
    }
    return create_row(ctx, ctx.registry[KIND], body, None)
