"""The certificates of an API session: issued for a client's CSR, recorded, looked up and removed.

An API session's certificates are the client certificates it may present to edge routers together with its token
(the fingerprint binds the two). A session started by certificate login records the client's own certificate
(:func:`controller.resources.api_session_certificates.record_session_certificate`, in the login's write); any fully
authenticated session may ask for short-lived ones (:func:`create_session_certificate`), which is how password and
JWT sessions get one.

Issued certificates follow Tollgate's one issuing profile (:mod:`controller.certificates.issuing`): the subject
is chosen by the controller, not copied from the CSR as the reference does, and is ``CN=<API session id>,
O=Tollgate``, so that a certificate names the session it was issued for and can never pass for an identity's
enrolled certificate (whose common name is the identity id). They are valid :data:`SESSION_CERTIFICATE_VALIDITY`
from the moment of issue, with the profile's usual back-dating of notBefore.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from controller.authentication.parts import IssuingParts
from controller.certificates.csr import load_csr
from controller.data.present import link
from controller.data.write_path import delete_row
from controller.errors import ApiError, not_found
from controller.model.spec import ReadContext, WriteContext
from controller.resources.api_session_certificates import KIND, PATH, record_session_certificate

__all__ = [
    "CSR_FIELD",
    "SESSION_CERTIFICATE_VALIDITY",
    "create_session_certificate",
    "delete_session_certificate",
    "owned_certificate",
    "session_certificate_ids",
]

SESSION_CERTIFICATE_VALIDITY = dt.timedelta(hours=12)
"""How long a certificate issued for an API session stays valid after the moment of issue (the reference's)."""

CSR_FIELD = "csr"
"""The request field carrying the CSR, named in error causes."""


async def create_session_certificate(parts: IssuingParts, api_session_id: str, csr_text: str) -> dict[str, Any]:
    """Issue a certificate for a CSR and bind it to the API session ``api_session_id``, durably.

    Args:
        parts: the store, the CA's issuer and the PKI.
        api_session_id: the caller's fully authenticated API session.
        csr_text: a PEM certificate signing request.

    Returns:
        The create answer: ``id`` and ``_links`` of the stored certificate, the ``certificate`` itself (PEM) and
        ``cas``, the controller's CA bundle (PEM) that the certificate chains to.

    Raises:
        ApiError: 400 COULD_NOT_PROCESS_CSR (cause on ``csr``) when the CSR cannot be read or used; 401
            UNAUTHORIZED when the session ended before the certificate was stored.
    """
    csr = load_csr(csr_text, CSR_FIELD)
    now = dt.datetime.fromtimestamp(parts.clock.now(), dt.UTC)
    # Signed before the write: the writer's transaction is shared by every concurrent write and must stay short.
    certificate = parts.issuer.session_certificate(csr, api_session_id, now=now,
                                                   validity=SESSION_CERTIFICATE_VALIDITY)

    def store(ctx: WriteContext) -> dict[str, Any]:
        if not ctx.txn.exists("api-sessions", api_session_id):  # logged out or expired since the request was checked
            raise ApiError("UNAUTHORIZED")
        return record_session_certificate(ctx, api_session_id, certificate)

    row = await parts.domain.write(store)
    return {"id": row["id"], "_links": {"self": link(f"{PATH}/{row['id']}")}, "certificate": row["certificate"],
            "cas": parts.pki.ca_pem.decode("ascii")}


def session_certificate_ids(ctx: ReadContext, api_session_id: str) -> list[str]:
    """The ids of an API session's certificates (none for an unknown session)."""
    return ctx.txn.ids_by_ref(KIND, "apiSessionId", api_session_id)


def owned_certificate(ctx: ReadContext, api_session_id: str, certificate_id: str) -> dict[str, Any]:
    """The stored row of one of an API session's certificates.

    Raises:
        ApiError: 404 NOT_FOUND when no certificate has ``certificate_id`` or it belongs to another session (the
            two are indistinguishable, so that ids of other sessions' certificates cannot be probed).
    """
    row = ctx.txn.get(KIND, certificate_id)
    if row is None or row.get("apiSessionId") != api_session_id:
        raise not_found(ctx.registry[KIND].singular, certificate_id)
    return row


async def delete_session_certificate(parts: IssuingParts, api_session_id: str, certificate_id: str) -> None:
    """Remove one of the API session ``api_session_id``'s certificates, durably.

    Raises:
        ApiError: 404 NOT_FOUND as :func:`owned_certificate`, checked in the same write as the delete.
    """
    def remove(ctx: WriteContext) -> None:
        owned_certificate(ctx, api_session_id, certificate_id)
        delete_row(ctx, ctx.registry[KIND], certificate_id)

    await parts.domain.write(remove)
