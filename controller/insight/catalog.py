"""Every event type and its fields, and the JSON schemas of what the event and access operations answer: the one
description the OpenAPI document, the README and the tests read.

Every event carries the envelope (:data:`ENVELOPE`) and its type's fields (:data:`EVENT_TYPES`, keyed
``namespace.event_type``). A ``cause`` is an object whose ``code`` names the cause; a failing check inside one
(``checks[]``) is described by :data:`FAILING_CHECK`. One change is one event: a session that ends is either
``edge.sessions.deleted`` (its API session ended by logout or expiry) or ``access.revoked`` (taken away), and a
granted request is ``edge.sessions.created`` (OpenZiti's record of the session, naming the policies that pass).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ACCESS_EXPLANATION", "ENVELOPE", "EVENT", "EVENT_TYPES", "FAILING_CHECK", "event_fields"]

ENVELOPE: dict[str, str] = {
    "event_id": "the event's number: one more than the event before it, in the order the events happened",
    "namespace": "edge.apiSessions, edge.sessions, entityChange, authentication (OpenZiti's), posture, access, mfa",
    "event_type": "the type within the namespace",
    "timestamp": "when it happened (the instant of the write that recorded it), RFC 3339 with milliseconds",
    "event_src_id": "the controller process that recorded it (its ziti-instance-id)",
}
_API_SESSION = {"id": "the API session", "type": "always legacy (an opaque session token)",
                "identity_id": "its identity", "ip_address": "the client's address at login",
                "authenticator_id": "what vouched for the login (an authenticator, or extJwtId:<signer>)"}
_SESSION = {"id": "the Dial/Bind session", "session_type": "Dial or Bind", "provider": "always legacy",
            "api_session_id": "its API session", "identity_id": "its identity", "service_id": "its service"}
_SUBJECT = {"identity_id": "the identity", "api_session_id": "the API session asking",
            "service_id": "the service", "session_type": "Dial or Bind"}
_ENTITY = {"eventId": "event_id, as text (OpenZiti's name)", "eventType": "created, updated or deleted",
           "entityType": "the kind (identities, service-policies...)", "entityId": "the entity's id",
           "isParentEvent": "always false (OpenZiti's field)",
           "metadata": "who: author.type (identity or controller), author.id, author.name, author.apiSessionId"}
EVENT_TYPES: dict[str, tuple[str, dict[str, str]]] = {
    "edge.apiSessions.created": ("An API session started: a login", _API_SESSION),
    "edge.apiSessions.deleted": ("An API session ended", {
        **_API_SESSION, "cause": "code: logout, expiry, disable (by: the admin), lockout, or deleted (by: the "
                                 "author; null for the controller, e.g. when its identity is deleted)"}),
    "edge.sessions.created": ("A session request passed posture and was granted: the posture decision, with the "
                              "policies that pass", {
        **_SESSION, "service_policy_ids": "the service policies that granted it"}),
    "edge.sessions.deleted": ("A Dial/Bind session ended with its API session (a session taken away is "
                              "access.revoked instead)", {
        **_SESSION, "cause": "code apiSessionEnded; apiSessionCause: logout or expiry"}),
    "entityChange.created": ("An entity was created", _ENTITY),
    "entityChange.updated": ("An entity was changed", {
        **_ENTITY, "changedFields": "the names of the fields that changed (never their values)"}),
    "entityChange.deleted": ("An entity was deleted", _ENTITY),
    "authentication.fail": ("A login was refused (not one refused by a throttle before any work)", {
        "type": "the method: password, cert or ext-jwt", "authenticator_id": "the password's authenticator, if any",
        "external_jwt_signer_id": "always null", "identity_id": "the identity the username belongs to, if any",
        "auth_policy_id": "that identity's auth policy", "remote_address": "the client's address",
        "success": "always false", "reason": "the error code and message"}),
    "mfa.passed": ("An API session proved MFA", {
        "identity_id": "the identity", "api_session_id": "the API session",
        "method": "totp or recoveryCode"}),
    "mfa.failed": ("An MFA code was refused", {
        "identity_id": "the identity", "api_session_id": "the API session", "reason": "MFA_INVALID_TOKEN or "
        "MFA_NOT_ENROLLED", "operation": "authenticate, verify, remove, recoveryCodes or regenerateRecoveryCodes",
        "locked_out": "this failure locked the identity out"}),
    "mfa.enrolled": ("An identity completed MFA enrolment", {
        "identity_id": "the identity", "api_session_id": "the API session that verified it"}),
    "mfa.removed": ("An identity's MFA enrolment was removed", {
        "identity_id": "the identity", "api_session_id": "the API session that removed it (null for an admin)",
        "by": "self or admin", "verified": "the enrolment was complete (its removal takes every MFA pass away)"}),
    "posture.denied": ("A session request was refused for posture", {
        **_SUBJECT, "cause": "code postureCheckFailed; checks: the failing checks of the linking policies"}),
    "posture.wouldDeny": ("Report-only checks would have refused a request or revoked a session", {
        **_SUBJECT, "session_id": "the session granted or kept",
        "decision": "request or recheck", "checks": "the failing report-only checks"}),
    "access.revoked": ("A Dial/Bind session was taken away", {
        "identity_id": "the identity", "session_id": "the session", "api_session_id": "its API session",
        "service_id": "the service", "session_type": "Dial or Bind",
        "cause": "code: postureCheckFailed, mfaTimeout (at: the timeout's instant), mfaGraceEnded (event, at: the "
                 "grace's end), mfaRemoved, noPolicy (reason: policyChange, roleChange or adopted), identityDisabled, "
                 "identityLockedOut, apiSessionDeleted, deleted (by); checks: the failing checks"}),
}
FAILING_CHECK: dict[str, str] = {
    "postureCheckId": "the check", "postureCheckName": "its name", "postureCheckType": "its typeId",
    "policyIds": "the linking policies that require it",
    "rule": "the rule that failed, in words, with what was reported and what the check requires (an OS check: the "
            "reported version and the ranges it is outside)",
    "mfa": "MFA checks: notPassed, timedOut, wake or unlock", "at": "MFA checks: the instant it started failing",
}


def event_fields(event_type: str) -> frozenset[str]:
    """Every field an event of ``event_type`` (``namespace.event_type``) carries, the envelope included."""
    return frozenset(ENVELOPE) | frozenset(EVENT_TYPES[event_type][1])


_STRING: dict[str, Any] = {"type": "string"}
_NULLABLE_STRING: dict[str, Any] = {"type": ["string", "null"]}
EVENT: dict[str, Any] = {
    "type": "object", "required": list(ENVELOPE), "additionalProperties": True,
    "description": "One event: the envelope, then the fields of its type (x-event-types).",
    "properties": {"event_id": {"type": "integer", "minimum": 1}, "namespace": _STRING, "event_type": _STRING,
                   "timestamp": {"type": "string", "format": "date-time"}, "event_src_id": _STRING},
    "x-event-types": {name: {"description": text, "fields": fields} for name, (text, fields) in EVENT_TYPES.items()},
    "x-failing-check": FAILING_CHECK,
}
_CHECK: dict[str, Any] = {"type": "object", "properties": {
    "id": _STRING, "name": _STRING, "typeId": _STRING, "reportOnly": {"type": "boolean"},
    "passing": {"type": "boolean"}, "selectedBy": {"type": "array", "items": _STRING},
    "reportedAt": _NULLABLE_STRING, "reportedBy": _NULLABLE_STRING, "rule": _NULLABLE_STRING, "reported": {},
    "required": {}, "remedy": _NULLABLE_STRING, "at": _NULLABLE_STRING}}
_POLICY: dict[str, Any] = {"type": "object", "properties": {
    "id": _STRING, "name": _STRING, "semantic": _STRING, "passing": {"type": "boolean"},
    "linkedBy": {"type": "object", "properties": {"identityRoles": {"type": "array", "items": _STRING},
                                                  "serviceRoles": {"type": "array", "items": _STRING}}},
    "checks": {"type": "array", "items": _CHECK}}}
_REF: dict[str, Any] = {"type": "object", "properties": {"id": _STRING, "name": _STRING}}
ACCESS_EXPLANATION: dict[str, Any] = {
    "type": "object",
    "required": ["identity", "service", "evaluatedAt", "postureEvaluation", "apiSession", "otherApiSessionIds",
                 "sessionTypes", "edgeRouters", "verdict"],
    "properties": {
        "identity": _REF, "service": _REF, "evaluatedAt": {"type": "string", "format": "date-time"},
        "postureEvaluation": {"type": "boolean"},
        "apiSession": {"type": ["object", "null"], "properties": {
            "id": _STRING, "createdAt": _STRING, "lastActivityAt": _STRING}},
        "otherApiSessionIds": {"type": "array", "items": _STRING},
        "sessionTypes": {"type": "array", "items": {"type": "object", "properties": {
            "type": {"type": "string", "enum": ["Dial", "Bind"]}, "allowed": {"type": "boolean"},
            "code": {"type": "string", "enum": ["GRANTED", "NOT_FOUND", "COULD_NOT_VALIDATE", "INVALID_POSTURE",
                                                "NO_EDGE_ROUTERS_AVAILABLE"]},
            "summary": _STRING, "policyIds": {"type": "array", "items": _STRING},
            "policies": {"type": "array", "items": _POLICY},
            "nextChange": {"type": ["object", "null"], "properties": {
                "at": _STRING, "code": _STRING, "reason": _STRING, "action": _STRING}},
            "actions": {"type": "array", "items": _STRING}}}},
        "edgeRouters": {"type": "object", "properties": {
            "identityRouterCount": {"type": "integer"}, "serviceRouterCount": {"type": "integer"},
            "common": {"type": "array", "items": {"type": "object", "properties": {
                "id": _STRING, "name": _STRING, "isOnline": {"type": "boolean"}, "disabled": {"type": "boolean"}}}}}},
        "verdict": _STRING,
    },
}
"""The JSON schema of ``GET /identities/{id}/access/{serviceId}``'s ``data``."""
