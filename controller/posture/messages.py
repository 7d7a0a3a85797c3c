"""Every message an identity actor receives: frozen data, dispatched with ``match`` in the state machine
(``controller/posture/machine.py``).

Callers outside the engine do not build these: :class:`controller.posture.engine.PostureEngine` offers a method for
each thing a caller wants. Posture payloads are plain mappings in wire names, as the Client API received and
validated them. Replies travel through a :class:`~actors.live_actors.OneShot`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from actors.live_actors import OneShot

ADOPTED = "adopted"
"""The reason of the re-check an identity's actor makes when a host adopts it (at start, or when its shard moves)."""

__all__ = [
    "ADOPTED",
    "ApiSessionEnded",
    "ApiSessionStarted",
    "CreateSession",
    "DeadlineReached",
    "IdentityMessage",
    "MfaPassed",
    "MfaRemoved",
    "PostureReported",
    "ReadState",
    "Reevaluate",
    "Settle",
    "WriteFailed",
]


@dataclass(frozen=True, slots=True)
class PostureReported:
    """What one posture request of an API session reported: responses (OS, MAC, DOMAIN, PROCESS) and whether the
    endpoint woke or was unlocked (ENDPOINT_STATE). The reply is the services whose MFA checks the endpoint state
    started a grace period for (empty without one)."""

    api_session_id: str
    responses: tuple[Mapping[str, Any], ...]
    reply: OneShot[Any] | None = None
    woken: bool = False
    unlocked: bool = False


@dataclass(frozen=True, slots=True)
class MfaPassed:
    """The API session proved MFA (TOTP or a recovery code)."""

    api_session_id: str


@dataclass(frozen=True, slots=True)
class MfaRemoved:
    """The identity removed its own MFA: every API session loses its MFA pass."""


@dataclass(frozen=True, slots=True)
class ApiSessionStarted:
    """An API session of the identity started (its durable row is written)."""

    api_session_id: str


@dataclass(frozen=True, slots=True)
class ApiSessionEnded:
    api_session_id: str


@dataclass(frozen=True, slots=True)
class DeadlineReached:
    """The scheduler woke the actor at the deadline it had armed."""

    deadline: float


@dataclass(frozen=True, slots=True)
class Reevaluate:
    """Policies, posture checks or the identity itself changed: work out again what the identity may use, and check
    every session again. ``reason`` names what changed, for the causes of revocations: ``policyChange`` (a kind
    that shapes access), ``roleChange`` (the identity's own roles) or :data:`ADOPTED` (the actor started on this
    host and checks what a change its previous host did not finish may take away)."""

    reason: str = "policyChange"


@dataclass(frozen=True, slots=True)
class CreateSession:
    """Decide a Dial/Bind session request and, when granted, create the session in the actor's order."""

    api_session_id: str
    service_id: str
    session_type: str
    tags: Mapping[str, Any]
    reply: OneShot[Any]


@dataclass(frozen=True, slots=True)
class ReadState:
    """Reply with the actor's current state (a consistent view after every earlier message)."""

    reply: OneShot[Any]


@dataclass(frozen=True, slots=True)
class Settle:
    """Reply None once every message queued before this one is handled and its writes are durable (a barrier)."""

    reply: OneShot[Any]


@dataclass(frozen=True, slots=True)
class WriteFailed:
    """A write the actor queued failed: what it holds in memory is ahead of what is stored; load it again (the
    shell does), and check every session again, so that a revocation the write carried is decided again."""


IdentityMessage = (PostureReported | MfaPassed | MfaRemoved | ApiSessionStarted | ApiSessionEnded | DeadlineReached
                   | Reevaluate | CreateSession | ReadState | Settle | WriteFailed)
