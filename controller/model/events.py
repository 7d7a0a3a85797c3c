"""What a write records besides its rows: the events it produces, the causes of the rows it ends, and who asked.

An event describes something that happened in the write that records it: it is stored, numbered and published with
that write's commit (``controller.insight``), so no event exists for a change that did not commit and none is
missing for one that did. Producers record what only they know:

* an :class:`Event` of a namespace of its own (a refused session request, a passed MFA code, a failed login), with
  :meth:`~controller.model.spec.WriteContext.record`;
* why they end a row of a kind whose changes are events (an API session ended by logout, a session revoked because
  a posture check failed), with :meth:`~controller.model.spec.WriteContext.end_cause`;

and the event log derives the rest from the write's :class:`~controller.model.spec.Change` s (entity changes,
sessions and API sessions created and deleted). :data:`AUTHOR` is who the write is for: the request boundary sets
it, the domain reads it when a write is queued.

Namespaces and field names are OpenZiti's where it has an event for the same thing (``edge.apiSessions``,
``edge.sessions``, ``entityChange``, ``authentication``); ``posture``, ``access`` and ``mfa`` are Tollgate's. No event
carries a secret: tokens, passwords, TOTP codes, recovery codes and keys are never put in one.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ACCESS",
    "API_SESSIONS",
    "AUTHENTICATION",
    "AUTHOR",
    "ENTITY_CHANGE",
    "MFA",
    "NAMESPACES",
    "POSTURE",
    "SESSIONS",
    "Author",
    "Cause",
    "Event",
]

API_SESSIONS = "edge.apiSessions"
SESSIONS = "edge.sessions"
ENTITY_CHANGE = "entityChange"
AUTHENTICATION = "authentication"
POSTURE = "posture"
ACCESS = "access"
MFA = "mfa"
NAMESPACES = (API_SESSIONS, SESSIONS, ENTITY_CHANGE, AUTHENTICATION, POSTURE, ACCESS, MFA)


Cause = Mapping[str, Any] | tuple[Any, ...]
"""Why a write ends a row: a JSON object whose ``code`` names the cause, or the posture engine's compact form of one
(an array of facts, ``controller/posture/step_events.py``), which readers of the event expand."""


@dataclass(frozen=True, slots=True)
class Event:
    """One event as its producer records it: its namespace, its type within it, and its own fields (a dict of wire
    names to JSON values, stored as they are when the write commits). The event log adds the id, the instant and
    the source."""

    namespace: str
    event_type: str
    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Author:
    """Who a write is for: the identity of the request's session and that session (None: the controller itself,
    as for the posture engine's revocations and the API sessions' expiry)."""

    identity_id: str
    api_session_id: str


AUTHOR: ContextVar[Author | None] = ContextVar("tollgate_author", default=None)
"""The author of the writes the current task queues; set by the request boundary (``web.route_table``)."""
