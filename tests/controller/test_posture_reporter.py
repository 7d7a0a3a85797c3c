"""Each posture record keeps when and by which API session it was reported; the console shows both."""

from __future__ import annotations

import msgspec

from controller.posture.records import PostureData, apply_response
from controller.posture.state import IdentityState, decode_state, encode_state

T0 = 1_700_000_000.0


def test_every_record_names_the_api_session_that_reported_it_last() -> None:
    data = PostureData()
    reports = [{"id": "os", "typeId": "OS", "type": "Linux", "version": "6.1.0"},
               {"id": "mac", "typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"]},
               {"id": "dom", "typeId": "DOMAIN", "domain": "corp"},
               {"id": "proc", "typeId": "PROCESS", "path": "/bin/agent", "isRunning": True}]
    for report in reports:
        data, _ = apply_response(data, report, T0, "session-a")
    assert data.os is not None and data.mac is not None and data.domain is not None
    assert {data.os.reported_by, data.mac.reported_by, data.domain.reported_by,
            data.processes["proc"].reported_by, data.process_paths["/bin/agent"].reported_by} == {"session-a"}
    # The same values from another session: nothing a rule reads changed, but the record says who and when.
    data, changed = apply_response(data, reports[1], T0 + 5, "session-b")
    assert not changed
    assert data.mac is not None and (data.mac.reported_by, data.mac.last_updated_at) == ("session-b", T0 + 5)


def test_records_stored_before_the_reporter_was_kept_still_read() -> None:
    data, _ = apply_response(PostureData(), {"id": "d", "typeId": "DOMAIN", "domain": "corp"}, T0, "s")
    state = IdentityState("i", data)
    stored = msgspec.msgpack.decode(encode_state(state))
    stored[1][2] = stored[1][2][:-1]  # the domain record as written before: without its reporter
    old = decode_state("i", msgspec.msgpack.encode(stored))
    assert old.posture.domain is not None
    assert (old.posture.domain.domain, old.posture.domain.reported_by) == ("corp", "")
    assert decode_state("i", encode_state(state)).posture.domain == data.domain
