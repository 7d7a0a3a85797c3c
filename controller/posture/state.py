"""An identity's posture state, what the posture engine persists per identity, and its stored form.

The state is stored as msgpack of the struct itself (an array per struct, see ``controller/posture/records.py``):
encoding and decoding run in msgspec's C code, with no dict built on the way. Rows written by earlier versions
(a map of field names, with the posture records inlined) are still read (:func:`decode_state`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import msgspec

from controller.posture.records import DomainRecord, MacRecord, MfaState, OsRecord, PostureData, ProcessRecord

__all__ = ["STATE_KIND", "IdentityState", "SessionPosture", "decode_state", "encode_state"]

STATE_KIND = "posture-state"
"""The raw kind the identities' states are stored under, keyed by identity id; only the actor of the identity (in a
cluster, on the node owning its shard) writes one."""


class SessionPosture(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """Per API session: its MFA state. (What the session reported at login, such as its SDK, is on its durable
    API-session row.)"""

    mfa: MfaState = msgspec.field(default_factory=MfaState)


class IdentityState(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """Everything the posture engine keeps for one identity (persisted after every change)."""

    identity_id: str
    posture: PostureData = msgspec.field(default_factory=PostureData)
    sessions: Mapping[str, SessionPosture] = msgspec.field(default_factory=dict)
    failures: tuple[Mapping[str, Any], ...] = ()
    last_change_at: float | None = None
    deadline: float | None = None
    access_digest: str | None = None
    # Sessions ("apiSessionId/serviceId/type") that report-only checks would revoke: reported once, until they pass.
    would_deny: frozenset[str] = frozenset()


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(IdentityState)
_legacy_decoder = msgspec.msgpack.Decoder(dict[str, Any])
# A msgpack array starts with 0x90-0x9f (up to 15 items), 0xdc or 0xdd; the earlier form was a map.
_ARRAY_STARTS = frozenset({*range(0x90, 0xA0), 0xDC, 0xDD})


def encode_state(state: IdentityState) -> bytes:
    """The stored bytes of ``state`` (keyed by its identity id)."""
    return _encoder.encode(state)


_NO_POSTURE = PostureData()


def decode_state(identity_id: str, data: bytes | None) -> IdentityState:
    """The state stored as ``data``; a fresh state when there is none."""
    if data is None:
        return IdentityState(identity_id, _NO_POSTURE)
    if data[0] in _ARRAY_STARTS:
        return _shared(identity_id, _decoder.decode(data))
    return _shared(identity_id, _legacy(identity_id, _legacy_decoder.decode(data)))


def _shared(identity_id: str, state: IdentityState) -> IdentityState:
    """``state`` holding what it can share instead of copies of its own: ``identity_id`` (the caller's, the actor's
    key), one empty posture for all, and its access digest interned (identities that the same policies select have
    the same one). A parked actor keeps its state in memory, so these copies would be much of what it costs."""
    posture = _NO_POSTURE if state.posture == _NO_POSTURE else state.posture
    digest = state.access_digest
    return msgspec.structs.replace(state, identity_id=identity_id, posture=posture,
                                   access_digest=sys.intern(digest) if digest is not None else None)


def _process(data: Mapping[str, Any]) -> ProcessRecord:
    return ProcessRecord(**{**data, "signer_fingerprints": tuple(data.get("signer_fingerprints") or ())})


def _legacy(identity_id: str, row: Mapping[str, Any]) -> IdentityState:
    """A state stored as a map by an earlier version."""
    mac = row.get("mac")
    posture = PostureData(
        os=OsRecord(**row["os"]) if row.get("os") else None,
        mac=MacRecord(**{**mac, "addresses": tuple(mac.get("addresses") or ())}) if mac else None,
        domain=DomainRecord(**row["domain"]) if row.get("domain") else None,
        processes={k: _process(v) for k, v in (row.get("processes") or {}).items()},
        process_paths={k: _process(v) for k, v in (row.get("processPaths") or {}).items()},
    )
    sessions = {k: SessionPosture(MfaState(**v["mfa"])) for k, v in (row.get("sessions") or {}).items()}
    return IdentityState(identity_id, posture, sessions, tuple(row.get("failures") or ()), row.get("lastChangeAt"),
                         row.get("deadline"), row.get("accessDigest"))
