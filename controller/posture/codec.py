"""An identity's posture state to and from the plain mapping stored in LMDB (msgpack-friendly)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from controller.posture.evaluate import DomainRecord, MacRecord, MfaState, OsRecord, PostureData, ProcessRecord
from controller.posture.machine import IdentityState, SessionPosture

__all__ = ["decode_state", "encode_state"]


def _flat(value: msgspec.Struct) -> dict[str, Any]:
    """A record of flat fields (strings, numbers, tuples of strings) as a mapping: a shallow copy, in C."""
    return msgspec.structs.asdict(value)


def _record(value: Any) -> dict[str, Any] | None:
    return None if value is None else _flat(value)


def encode_state(state: IdentityState) -> dict[str, Any]:
    """The stored row of an identity's posture state (keyed by the identity id)."""
    posture = state.posture
    return {
        "id": state.identity_id,
        "os": _record(posture.os),
        "mac": _record(posture.mac),
        "domain": _record(posture.domain),
        "processes": {k: _flat(v) for k, v in posture.processes.items()},
        "processPaths": {k: _flat(v) for k, v in posture.process_paths.items()},
        "sessions": {k: {"mfa": _flat(v.mfa)} for k, v in state.sessions.items()},
        "failures": [dict(f) for f in state.failures],
        "lastChangeAt": state.last_change_at,
        "deadline": state.deadline,
        "accessDigest": state.access_digest,
    }


def _process(data: Mapping[str, Any]) -> ProcessRecord:
    return ProcessRecord(**{**data, "signer_fingerprints": tuple(data.get("signer_fingerprints") or ())})


def decode_state(identity_id: str, row: Mapping[str, Any] | None) -> IdentityState:
    """The state stored in ``row``; a fresh state when there is none."""
    if row is None:
        return IdentityState(identity_id)
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
