"""The one table of API error codes, and the exceptions the domain raises.

Every failure a client can see is an :class:`ApiError` carrying one :class:`ErrorCode` from :data:`CODES` plus an
optional cause. The web layer renders it as the error envelope; nothing else decides a status or a message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CODES",
    "ApiError",
    "ErrorCode",
    "FieldError",
    "field_cause",
    "format_value",
    "nested_cause",
    "not_found",
]


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One row of the error table: wire code, HTTP status and the exact message clients see."""

    code: str
    status: int
    message: str


def _table(*rows: tuple[str, int, str]) -> dict[str, ErrorCode]:
    return {code: ErrorCode(code, status, message) for code, status, message in rows}


CODES: dict[str, ErrorCode] = _table(
    ("NOT_FOUND", 404, "The resource requested was not found or is no longer available"),
    ("UNAUTHORIZED", 401,
     "The request could not be completed. The session is not authorized or the credentials are invalid"),
    ("COULD_NOT_VALIDATE", 400,
     "The supplied request contains an invalid document or no valid accept content were available, see cause"),
    ("COULD_NOT_PARSE_BODY", 400, "The body of the request could not be parsed"),
    ("INVALID_FILTER", 400, "The filter query supplied is invalid"),
    ("INVALID_PAGINATION", 400, "The pagination properties provided are invalid"),
    ("INVALID_SORT_IDENTIFIER", 400, "The sort order supplied is invalid"),
    ("UNHANDLED", 500, "An unhandled error occurred"),
    ("METHOD_NOT_ALLOWED", 405, "The resource requested does not support this HTTP verb"),
    ("INVALID_AUTH", 401, "The authentication request failed"),
    ("INVALID_AUTH_METHOD", 400, "The supplied authentication method is not valid"),
    ("INVALID_POSTURE", 409, "Posture response data is missing or wrong"),
    ("NO_EDGE_ROUTERS_AVAILABLE", 400, "No edge routers are assigned and online to handle the requested connection"),
    ("MFA_EXISTS", 409, "An MFA record already exists, try removing it"),
    ("MFA_INVALID_TOKEN", 400, "An invalid token/code was provided"),
    ("MFA_NOT_ENROLLED", 409, "The current identity is not enrolled in MFA"),
    ("ENTITY_CAN_NOT_BE_DELETED", 400, "The entity requested for delete can not be deleted"),
    ("CAN_NOT_DELETE_REFERENCED_ENTITY", 409,
     "the entity cannot be deleted because it is referenced by another entity, see cause"),
    ("REFERENCED_ENTITY_NOT_FOUND", 400, "REFERENCED_ENTITY_NOT_FOUND"),
    ("ENROLLMENT_EXISTS", 409, "ENROLLMENT_EXISTS"),
    ("INVALID_ENROLLMENT_TOKEN", 400, "The supplied token is not valid"),
    ("ENROLLMENT_EXPIRED", 400, "The window for this enrollment has expired"),
    ("COULD_NOT_PROCESS_CSR", 400, "The supplied csr could not be processed"),
    ("ENROLLMENT_CA_NOT_VALID", 400, "The CA tied to the supplied token is no longer valid"),
    ("ENROLLMENT_NO_VALID_CAS", 400, "No CAs are valid for this request"),
    ("INVALID_ENROLL_METHOD", 400, "The supplied enrollment method is not valid"),
    ("MISSING_OR_INVALID_CSR", 400, "The supplied enrollment request is missing or contains an invalid CSR"),
    ("INVALID_CONTENT_TYPE", 400, "The content type supplied is not acceptable"),
    ("CERT_FAILED_VALIDATION", 400, "certificate failed to validate against CA"),
    ("CERT_IN_USE", 409, "The certificate supplied is already associated with another identity"),
    ("MISSING_CERT_CLAIM", 400, "The certificate is expected to contain and externalId, which was not found"),
    ("CERTIFICATE_IS_NOT_CA", 400, "Leading certificate is not a CA"),
    ("COULD_NOT_PARSE_PEM_BLOCK", 400, "The certificate's PEM block could not be parsed"),
    ("CAN_NOT_UPDATE_AUTHENTICATOR", 409, "The authenticator cannot be updated in this fashion"),
    ("INVALID_CLIENT_CERT", 400, "The provided client certificate is invalid"),
    ("CA_ALREADY_VERIFIED", 409, "CA has already been verified"),
    ("INVALID_COMMON_NAME", 400, "The common name of the supplied certificate is invalid"),
    ("CERTIFICATE_FAILED_VALIDATION", 400,
     "The supplied certificate failed to validate against the CA's certificate chain"),
    ("EXPECTED_PEM_CERTIFICATE", 400, "expected PEM block type 'CERTIFICATE'"),
    ("COULD_NOT_PARSE_DER_BLOCK", 400, "The certificate's DER block could not be parsed"),
    ("INVALID_CERT_PEM", 400,
     "the supplied certificate PEM is either invalid or contains the incorrect number of certificates"),
    ("MAX_AUTHENTICATOR_METHODS_REACHED", 409,
     "The identity already has the maximum authenticators of the specified method"),
    ("RATE_LIMITED", 429,
     "The requested operation is rate limited and the rate limit has been exceeded. Please try again later"),
    ("REQUEST_TOO_LARGE", 413, "The request body exceeds the size limit"),
    ("REQUEST_TIMEOUT", 408, "The request body did not arrive in time"),
    ("CLUSTER_UNAVAILABLE", 503,
     "The cluster's shared store cannot take writes now (no quorum). Please try again later; see the cause for "
     "whether the change may still be applied"),
    ("WRITE_TOO_LARGE", 413, "The change is larger than the cluster's shared store accepts in one transaction"),
)


def format_value(value: Any) -> str:
    """Render a value for a cause the way clients of the reference controller see it (always a string)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + " ".join(format_value(v) for v in value) + "]"
    return str(value)


def field_cause(field_name: str, reason: str, value: Any) -> dict[str, Any]:
    """A field cause: ``{field, reason, value}`` with the value rendered as a string."""
    return {"field": field_name, "reason": reason, "value": format_value(value)}


def nested_cause(message: str, code: str = "UNHANDLED", data: Any = None) -> dict[str, Any]:
    """A nested cause: ``{code, message}`` plus optional ``data``."""
    cause: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        cause["data"] = data
    return cause


@dataclass
class ApiError(Exception):
    """A failure with a code from :data:`CODES` and an optional cause; raised anywhere, rendered at the request."""

    code: str
    cause: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise KeyError(f"unknown error code {self.code}")
        super().__init__(self.code)

    @property
    def status(self) -> int:
        return CODES[self.code].status

    @property
    def message(self) -> str:
        return CODES[self.code].message


class FieldError(ApiError):
    """A business-rule violation on one field: 400 ``COULD_NOT_VALIDATE`` with a ``{field, reason, value}`` cause."""

    def __init__(self, field_name: str, reason: str, value: Any) -> None:
        super().__init__("COULD_NOT_VALIDATE", field_cause(field_name, reason, value))
        self.field = field_name
        self.reason = reason
        self.value = value


def not_found(singular: str, entity_id: str) -> ApiError:
    """404 for an unknown id, with the reference controller's cause text (``identity with id X not found``)."""
    return ApiError("NOT_FOUND", nested_cause(f"{singular} with id {entity_id} not found"))
