"""One API session in memory (:class:`LiveSession`), the row keys it is kept under, and how it is read back from
its row (``controller/authentication/api_sessions.py`` keeps them all)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import trio

from controller.clock import Clock, parse_time

__all__ = ["EXT_JWT_SIGNER", "EXT_JWT_UNTIL", "KIND", "PARTIAL_SECONDS", "TOKEN_DIGEST", "ApiSessionsStatistics",
           "LiveSession", "row_lifetime", "session_of_row", "token_digest"]

PARTIAL_SECONDS = 300.0
"""How long a session owing its second factor lives, from its login."""

KIND = "api-sessions"
TOKEN_DIGEST = "_tokenSha256"
"""The row key of the token's digest (internal: never shown)."""
# Internal row keys (present() hides keys starting with "_"): the signer owed, and until when (wall-clock epoch
# seconds) a JWT from it satisfies the factor.
EXT_JWT_SIGNER = "_extJwtSignerId"
EXT_JWT_UNTIL = "_extJwtUntil"


def token_digest(token: str) -> str:
    """Lower-case hex SHA-256 of a session token: what the store and the in-memory index keep of it."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(slots=True)
class LiveSession:
    """The in-memory state of one API session.

    ``token_digest`` is :func:`token_digest` of the session's token. ``last_activity`` is wall-clock epoch seconds
    (what ``lastActivityAt`` shows); ``deadline`` is the Trio time at which the session ends unless it is used
    again. ``ext_jwt_signer_id`` names the external JWT signer the auth policy required at login (None when it
    required none); ``ext_jwt_until`` is the Trio time until which a JWT from it satisfies that factor (minus
    infinity until one is brought).
    """

    id: str
    token_digest: str
    identity_id: str
    last_activity: float
    persisted_activity: float
    mfa_required: bool = False
    mfa_complete: bool = False
    deadline: float = 0.0
    ext_jwt_signer_id: str | None = None
    ext_jwt_until: float = -math.inf
    persisting: bool = False  # a write of its activity is queued (nodes of a cluster share activity)

    @property
    def mfa_owed(self) -> bool:
        """MFA is required and no code was given yet."""
        return self.mfa_required and not self.mfa_complete

    @property
    def ext_jwt_owed(self) -> bool:
        """A JWT from the required external signer is owed: none was brought, or the last one has expired."""
        return self.ext_jwt_signer_id is not None and trio.current_time() >= self.ext_jwt_until

    @property
    def never_complete(self) -> bool:
        """Owing a second factor it has never given since its login (an external JWT that has merely expired was
        given): such a session lives at most :data:`PARTIAL_SECONDS` from its login."""
        return self.mfa_owed or (self.ext_jwt_signer_id is not None and self.ext_jwt_until == -math.inf)

    @property
    def partial(self) -> bool:
        """Still owing a second factor (MFA, an external JWT, or both): only the MFA routes and the session's own
        detail and logout are open to it."""
        return self.mfa_owed or self.ext_jwt_owed


@dataclass(frozen=True, slots=True)
class ApiSessionsStatistics:
    """A snapshot of :class:`ApiSessions` counters.

    Attributes:
        live_sessions: sessions held in memory.
    """

    live_sessions: int


def _never_complete_row(row: Mapping[str, Any]) -> bool:
    """A stored session that owes a second factor it never gave (as :attr:`LiveSession.never_complete`)."""
    mfa_owed = bool(row.get("isMfaRequired")) and not row.get("isMfaComplete")
    return mfa_owed or (row.get(EXT_JWT_SIGNER) is not None and row.get(EXT_JWT_UNTIL) is None)


def row_lifetime(row: Mapping[str, Any], timeout: float, grace: float) -> float:
    """Seconds a stored session lives after its ``lastActivityAt``: the timeout (plus ``grace``, the activity other
    nodes of a cluster may not have persisted yet), or at most :data:`PARTIAL_SECONDS` from its login while it
    owes a second factor it never gave (its use does not extend that)."""
    return min(timeout, PARTIAL_SECONDS) if _never_complete_row(row) else timeout + grace


def session_of_row(row: Mapping[str, Any], clock: Clock, timeout: float, grace: float) -> LiveSession:
    """The live session a stored row describes, ending ``row_lifetime`` after its persisted last activity."""
    last = parse_time(row["lastActivityAt"])
    digest = row.get(TOKEN_DIGEST) or token_digest(str(row.get("token", "")))
    session = LiveSession(row["id"], digest, row["identityId"], last, last, bool(row.get("isMfaRequired")),
                          bool(row.get("isMfaComplete")))
    session.ext_jwt_signer_id = row.get(EXT_JWT_SIGNER)
    if row.get(EXT_JWT_UNTIL) is not None:
        session.ext_jwt_until = clock.to_trio(float(row[EXT_JWT_UNTIL]))
    session.deadline = clock.to_trio(last) + row_lifetime(row, timeout, grace)
    return session
