"""The stored form of an identity actor's state (:mod:`controller.posture.state`): a state the machine built
survives encoding, and rows an earlier version stored as maps are still read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from controller.posture.messages import ApiSessionStarted, MfaPassed, PostureReported
from controller.posture.records import PostureData
from controller.posture.state import IdentityState, decode_state, encode_state
from tests.controller.test_posture_machine import request, run


def _full_state() -> IdentityState:
    t = run(IdentityState("i1"), PostureReported("s1", (
        {"id": "c1", "typeId": "OS", "type": "Linux", "version": "6.1.0"},
        {"id": "c2", "typeId": "MAC", "macAddresses": ["aa-bb-cc-dd-ee-ff"]},
        {"id": "c3", "typeId": "DOMAIN", "domain": "corp"},
        {"id": "c4", "typeId": "PROCESS", "path": "/bin/a", "isRunning": True, "signerFingerprints": ["ab"]},
    )), MfaPassed("s1"), ApiSessionStarted("s2"), now=100.0)
    t = run(t.state, PostureReported("s1", (), woken=True, unlocked=True), request("s2", "mfa-svc"), now=120.0)
    return t.state


def test_codec_round_trip() -> None:
    state = _full_state()
    assert state.failures and state.deadline is not None and state.access_digest is not None
    assert decode_state("i1", encode_state(state)) == state
    assert decode_state("i9", None) == IdentityState("i9")


def _legacy_row(state: IdentityState) -> Mapping[str, Any]:
    """``state`` as an earlier version stored it: a map of field names, the posture records inlined."""
    def fields(record: Any) -> dict[str, Any] | None:
        return None if record is None else {f: getattr(record, f) for f in record.__struct_fields__}

    posture: PostureData = state.posture
    return {"os": fields(posture.os), "mac": fields(posture.mac), "domain": fields(posture.domain),
            "processes": {k: fields(v) for k, v in posture.processes.items()},
            "processPaths": {k: fields(v) for k, v in posture.process_paths.items()},
            "sessions": {k: {"mfa": fields(v.mfa)} for k, v in state.sessions.items()},
            "failures": list(state.failures), "lastChangeAt": state.last_change_at, "deadline": state.deadline,
            "accessDigest": state.access_digest}


def test_rows_stored_as_maps_by_an_earlier_version_are_still_read() -> None:
    state = _full_state()
    assert decode_state("i1", msgspec.msgpack.encode(_legacy_row(state))) == state
    bare: dict[str, Any] = {"sessions": {}, "failures": [], "lastChangeAt": None}
    assert decode_state("i2", msgspec.msgpack.encode(bare)) == IdentityState("i2")
