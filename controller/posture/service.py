"""The posture engine as the rest of the controller reaches it: the web routes, logins and MFA ask through
:class:`PostureService`, never the engine itself, so that what answers (this node's engine, or one routing each
identity to the node that owns it) can change without them knowing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from controller.posture.state import IdentityState

__all__ = ["Moved", "Ownership", "PostureService", "RechecksElsewhere"]


class Moved(Exception):
    """The identity's actor is no longer hosted here (its shard went to another node of the cluster): what asked it
    asks the owner instead."""


class Ownership(Protocol):
    """Which identities a cluster node's engine hosts (``controller.cluster`` gives it; a single node hosts every
    identity and has none)."""

    def owns(self, identity_id: str) -> bool:
        """Whether this node hosts the identity's actor now."""

    def fence(self, identity_id: str) -> Sequence[object]:
        """The conditions under which a write of the identity's actor may commit: this node still owns it."""


class RechecksElsewhere(Protocol):
    """How a cluster node's engine waits for the re-checks a write it committed brings on the other nodes
    (``controller.cluster`` gives it; a single node hosts every identity and has none)."""

    def __call__(self, identity_ids: frozenset[str] | None) -> Callable[[], Awaitable[None]]:
        """The barrier that completes once the identities among ``identity_ids`` (None: every one holding API
        sessions) that this node did not host when it was called have re-checked their sessions, durably, after
        the write just committed, wherever they are hosted (by their next host, if theirs stopped meanwhile).
        Called as this node posts its own re-checks; nothing is sent until it is awaited."""


class PostureService(Protocol):
    """What callers ask of identities' actors (:class:`controller.posture.engine.PostureEngine` is one)."""

    async def report_posture(self, identity_id: str, api_session_id: str, responses: Sequence[Mapping[str, Any]],
                             *, woken: bool = False, unlocked: bool = False) -> list[dict[str, Any]]:
        """Record what an API session's endpoint reported and re-check the identity's sessions; returns the
        services whose MFA timer a wake or unlock started."""

    async def request_session(self, identity_id: str, api_session_id: str, service_id: str, session_type: str,
                              tags: Mapping[str, Any]) -> dict[str, Any]:
        """Decide a Dial/Bind session request; returns the session's row."""

    async def state(self, identity_id: str) -> IdentityState:
        """The identity's current state (every earlier message handled)."""

    def api_session_started(self, identity_id: str, api_session_id: str) -> None:
        """An API session of the identity started."""

    async def mfa_passed(self, identity_id: str, api_session_id: str) -> None:
        """The API session proved MFA; returns once the identity's actor has taken it into account."""

    async def mfa_removed(self, identity_id: str) -> None:
        """The identity's MFA enrolment is gone; returns once the sessions that depended on it are revoked."""
