"""API sessions as a resource (admin list, detail, delete) and auth policies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.model.field import NAME, REQUIRED_CU, Field, Mode, bool_field, object_field, string_field, string_list
from controller.model.spec import Hooks, ReadContext, Resource

__all__ = ["API_SESSIONS", "AUTH_POLICIES", "DEFAULT_AUTH_POLICY"]


def _api_session_present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out["token"] = ""
    out.setdefault("authQueries", [])
    out.setdefault("configTypes", [])
    out["cachedLastActivityAt"] = row.get("lastActivityAt")
    out["cachedUpdatedAt"] = row.get("updatedAt")


API_SESSIONS = Resource(
    kind="api-sessions", singular="apiSession", op_name="APISessions", op_plural="APISessions", tag="API Session",
    body_name="apiSession",
    fields=(
        # Shown empty: the store keeps only the token's digest (api_sessions.TOKEN_DIGEST); only the session's own
        # client, which presents it, sees its token (current-api-session).
        string_field("token", writable=frozenset(), stored=False, filterable=False),
        Field("_tokenSha256", {"type": "string"}, writable=frozenset({Mode.CREATE})),
        string_field("identityId", writable=frozenset({Mode.CREATE}), ref="identities", ref_name="identity",
                     on_delete="cascade"),
        string_field("authenticatorId", writable=frozenset({Mode.CREATE})),
        string_field("ipAddress", writable=frozenset({Mode.CREATE})),
        string_field("lastActivityAt", writable=frozenset({Mode.CREATE})),
        bool_field("isMfaRequired", writable=frozenset({Mode.CREATE}), default=False),
        bool_field("isMfaComplete", writable=frozenset({Mode.CREATE}), default=False),
        string_list("configTypes", writable=frozenset({Mode.CREATE}), default=list),
        object_field("envInfo", writable=frozenset({Mode.CREATE}), default=dict),
        object_field("sdkInfo", writable=frozenset({Mode.CREATE}), default=dict),
    ),
    operations=frozenset({"list", "detail", "delete"}),
    hooks=Hooks(present=_api_session_present),
    # Deleting an authenticator ends the sessions it authenticated (controller/resources/authenticators.py).
    indexes=(("authenticatorId",),),
)

_PRIMARY = {
    "type": "object", "required": ["updb", "cert", "extJwt"],
    "properties": {
        "cert": {"type": "object", "required": ["allowed", "allowExpiredCerts"],
                 "properties": {"allowed": {"type": "boolean"}, "allowExpiredCerts": {"type": "boolean"}}},
        "extJwt": {"type": "object", "required": ["allowed"],
                   "properties": {"allowed": {"type": "boolean"},
                                  "allowedSigners": {"type": "array", "items": {"type": "string"}}}},
        "updb": {"type": "object",
                 "required": ["allowed", "minPasswordLength", "requireSpecialChar", "requireNumberChar",
                              "requireMixedCase", "maxAttempts", "lockoutDurationMinutes"],
                 "properties": {"allowed": {"type": "boolean"}, "minPasswordLength": {"type": "integer"},
                                "requireSpecialChar": {"type": "boolean"},
                                "requireNumberChar": {"type": "boolean"}, "requireMixedCase": {"type": "boolean"},
                                "maxAttempts": {"type": "integer"},
                                "lockoutDurationMinutes": {"type": "integer"}}},
    },
}
_SECONDARY = {"type": "object", "required": ["requireTotp"],
              "properties": {"requireTotp": {"type": "boolean"},
                             "requireExtJwtSigner": {"type": ["string", "null"]}}}

DEFAULT_AUTH_POLICY: dict[str, Any] = {
    "id": "default", "name": "Default", "isSystem": True,
    "primary": {
        "cert": {"allowed": True, "allowExpiredCerts": True},
        "extJwt": {"allowed": True, "allowedSigners": []},
        "updb": {"allowed": True, "minPasswordLength": 5, "requireSpecialChar": False, "requireNumberChar": False,
                 "requireMixedCase": False, "maxAttempts": 0, "lockoutDurationMinutes": 0},
    },
    "secondary": {"requireTotp": False, "requireExtJwtSigner": None},
}

AUTH_POLICIES = Resource(
    kind="auth-policies", singular="authPolicy", op_name="AuthPolicy", op_plural="AuthPolicies",
    tag="Auth Policy", body_name="authPolicy",
    fields=(
        NAME,
        object_field("primary", _PRIMARY, required=REQUIRED_CU),
        object_field("secondary", _SECONDARY, required=REQUIRED_CU),
    ),
)
