"""The etcd client's sans-IO core, without etcd: request bodies and limits, answers with their left-out defaults,
error answers mapped to exceptions, watch lines, and the watch cursor's rule (each event once, in order).

The answers are the JSON gateway's own, as etcd 3.4.23 sent them."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest

from controller.etcd import (
    MAX_REQUEST_BYTES,
    MAX_TXN_OPS,
    Compacted,
    Compare,
    CompareOp,
    CompareTarget,
    Delete,
    EtcdError,
    EventType,
    FutureRevision,
    InvalidArgument,
    LeaseNotFound,
    Op,
    OutcomeUnknown,
    ProtocolError,
    Put,
    PutResult,
    Range,
    RangeResult,
    RequestTooLarge,
    TooManyOperations,
    Unavailable,
    WatchCanceled,
    prefix_end,
)
from controller.etcd.answers import (
    decode,
    decode_error,
    decode_keepalive,
    decode_members,
    decode_time_to_live,
    decode_txn,
    decode_watch_line,
)
from controller.etcd.bodies import compare_body, encode, put_body, range_body, txn_body, watch_create_body
from controller.etcd.watch import OutOfOrder, WatchCursor

HEADER = ('"header":{"cluster_id":"4097838329247207768","member_id":"6164101676926672534","revision":"9",'
          '"raft_term":"2"}')


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def body_json(body: dict[str, Any]) -> Any:
    return json.loads(encode(body))


# -- requests ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("prefix", "end"), [(b"a/", b"a0"), (b"a\xff", b"b"), (b"a\xff\xff", b"b"),
                                             (b"\xff", b"\0"), (b"\xff\xff", b"\0"), (b"\x00", b"\x01")])
def test_prefix_end_is_the_first_key_after_every_key_with_the_prefix(prefix: bytes, end: bytes) -> None:
    assert prefix_end(prefix) == end


def test_a_range_body_sends_only_what_differs_from_the_defaults() -> None:
    assert body_json(range_body(Range("k"))) == {"key": b64("k")}
    assert body_json(range_body(Range("k/", prefix=True, revision=7, limit=2, serializable=True, keys_only=True,
                                      count_only=True))) == {
        "key": b64("k/"), "range_end": b64("k0"), "revision": 7, "limit": 2, "serializable": True,
        "keys_only": True, "count_only": True}
    assert body_json(range_body(Range(b"a", b"c"))) == {"key": b64("a"), "range_end": b64("c")}


@pytest.mark.parametrize("request_", [Range(""), Range("k", "z", prefix=True), Range("k", revision=-1),
                                      Delete(b""), Put("", "v")])
def test_a_malformed_request_is_refused_before_it_is_sent(request_: Range | Delete | Put) -> None:
    with pytest.raises(InvalidArgument):
        txn_body([], [request_], [])


def test_each_compare_target_carries_its_operand_in_its_own_field() -> None:
    fields = {CompareTarget.MOD: "mod_revision", CompareTarget.CREATE: "create_revision",
              CompareTarget.VERSION: "version", CompareTarget.LEASE: "lease"}
    for target, field in fields.items():
        for op in CompareOp:
            assert body_json(compare_body(Compare("k", target, op, 5))) == {
                "key": b64("k"), "target": target.value, "result": op.value, field: 5}
    assert body_json(compare_body(Compare("k", CompareTarget.VALUE, CompareOp.EQUAL, "v", range_end="l"))) == {
        "key": b64("k"), "target": "VALUE", "result": "EQUAL", "value": b64("v"), "range_end": b64("l")}
    assert body_json(compare_body(Compare.absent("k")))["create_revision"] == 0
    with pytest.raises(InvalidArgument):
        compare_body(Compare("k", CompareTarget.VALUE, CompareOp.EQUAL, 3))
    with pytest.raises(InvalidArgument):
        compare_body(Compare("k", CompareTarget.MOD, CompareOp.EQUAL, b"3"))


def test_a_txn_body_names_each_operation_by_its_kind() -> None:
    success: list[Op] = [Put("k", "v", lease=9, prev_kv=True), Delete("d/", prefix=True)]
    body = body_json(txn_body([Compare.unchanged("k", 4)], success, [Range("k")]))
    assert body == {
        "compare": [{"key": b64("k"), "target": "MOD", "result": "EQUAL", "mod_revision": 4}],
        "success": [{"request_put": {"key": b64("k"), "value": b64("v"), "lease": 9, "prev_kv": True}},
                    {"request_delete_range": {"key": b64("d/"), "range_end": b64("d0")}}],
        "failure": [{"request_range": {"key": b64("k")}}]}


def test_etcd_limits_are_checked_before_sending() -> None:
    puts = [Put(f"k{i}", "v") for i in range(MAX_TXN_OPS)]
    txn_body([], puts, puts)
    with pytest.raises(TooManyOperations):
        txn_body([], [*puts, Put("one-more", "v")], [])
    with pytest.raises(TooManyOperations):
        txn_body([], [], [*puts, Range("one-more")])

    encode(put_body(Put("big", b"x" * (MAX_REQUEST_BYTES - 1024))))
    with pytest.raises(RequestTooLarge):
        encode(put_body(Put("big", b"x" * MAX_REQUEST_BYTES)))
    many = [Put(f"k{i}", b"x" * (MAX_REQUEST_BYTES // 100)) for i in range(101)]
    with pytest.raises(RequestTooLarge):
        encode(txn_body([], many[:100], many[100:]))


def test_a_watch_body_creates_the_watch_from_its_start_revision() -> None:
    assert body_json(watch_create_body(Range("w/", prefix=True), start_revision=12, prev_kv=True,
                                       progress_notify=True)) == {"create_request": {
        "key": b64("w/"), "range_end": b64("w0"), "start_revision": 12, "prev_kv": True, "progress_notify": True}}
    assert body_json(watch_create_body(Range("w"), start_revision=0, prev_kv=False, progress_notify=False)) == {
        "create_request": {"key": b64("w")}}


# -- answers -------------------------------------------------------------------------------------------------------

def test_a_range_answer_has_its_defaults_filled_in() -> None:
    missing = decode(f"{{{HEADER}}}".encode(), RangeResult)
    assert (missing.kvs, missing.count, missing.more, missing.header.revision) == ((), 0, False, 9)
    found = decode(f'{{{HEADER},"kvs":[{{"key":"{b64("foo")}","create_revision":"2","mod_revision":"3",'
                   f'"version":"2","value":"{b64("bar")}","lease":"7587869413344528906"}}],"count":"1"}}'.encode(),
                   RangeResult)
    kv = found.kvs[0]
    assert (kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease) == (
        b"foo", b"bar", 2, 3, 2, 7587869413344528906)
    assert found.count == 1
    assert found.header.member_id == 6164101676926672534
    assert decode(f'{{{HEADER},"prev_kv":{{"key":"{b64("k")}"}}}}'.encode(), PutResult).prev_kv is not None


def test_a_failed_txn_answer_has_no_succeeded_field() -> None:
    failed = decode_txn(f'{{{HEADER},"responses":[{{"response_range":{{"header":{{"revision":"2"}},"kvs":[{{'
                        f'"key":"{b64("foo")}","create_revision":"2","mod_revision":"2","version":"1",'
                        f'"value":"{b64("bar")}"}}],"count":"1"}}}}]}}'.encode())
    assert failed.succeeded is False
    assert isinstance(failed.responses[0], RangeResult)
    assert failed.responses[0].kvs[0].value == b"bar"
    succeeded = decode_txn(f'{{{HEADER},"succeeded":true,"responses":[{{"response_put":{{"header":{{"revision":'
                           f'"7"}}}}}},{{"response_delete_range":{{"header":{{}},"deleted":"2"}}}}]}}'.encode())
    assert succeeded.succeeded is True
    assert [type(r).__name__ for r in succeeded.responses] == ["PutResult", "DeleteResult"]
    assert decode_txn(f"{{{HEADER}}}".encode()).responses == ()
    with pytest.raises(ProtocolError):
        decode_txn(b'{"responses":[{}]}')


def test_lease_answers_that_mean_the_lease_is_gone() -> None:
    assert decode_keepalive(f'{{"result":{{{HEADER},"ID":"123","TTL":"5"}}}}\n'.encode(), 123) == 5
    with pytest.raises(LeaseNotFound):  # etcd answers 200 without a TTL for a dead lease
        decode_keepalive(f'{{"result":{{{HEADER},"ID":"123"}}}}\n'.encode(), 123)
    with pytest.raises(Unavailable):
        decode_keepalive(b'{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader",'
                         b'"http_status":"Service Unavailable"}}', 123)
    info = decode_time_to_live(f'{{{HEADER},"ID":"5","TTL":"3","grantedTTL":"5","keys":["{b64("k")}"]}}'.encode(), 5)
    assert (info.ttl, info.granted_ttl, info.keys) == (3, 5, (b"k",))
    with pytest.raises(LeaseNotFound):
        decode_time_to_live(f'{{{HEADER},"ID":"123","TTL":"-1"}}'.encode(), 123)


def test_members_are_decoded_with_their_urls() -> None:
    members = decode_members(b'{"members":[{"ID":"12359086193383809113","name":"m1","peerURLs":["http://p"],'
                             b'"clientURLs":["http://c"]},{"ID":"5","peerURLs":["http://q"]}]}')
    assert members[0].id == 12359086193383809113
    assert (members[0].name, members[0].peer_urls, members[0].client_urls) == ("m1", ("http://p",), ("http://c",))
    assert (members[1].name, members[1].client_urls, members[1].is_learner) == ("", (), False)


def test_an_unreadable_answer_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode(b"<html>", RangeResult)
    with pytest.raises(ProtocolError):
        decode(b'{"count":"many"}', RangeResult)


def gateway_error(code: int, message: str) -> bytes:
    return msgspec.json.encode({"error": message, "message": message, "code": code})


@pytest.mark.parametrize(("status", "body", "write", "kind"), [
    (503, gateway_error(14, "etcdserver: no leader"), False, Unavailable),
    (503, gateway_error(14, "etcdserver: no leader"), True, Unavailable),  # refused before raft: not applied
    (503, gateway_error(14, "etcdserver: request timed out"), False, Unavailable),
    (503, gateway_error(14, "etcdserver: request timed out"), True, OutcomeUnknown),
    (503, gateway_error(14, "etcdserver: request timed out, possibly due to previous leader failure"), True,
     OutcomeUnknown),
    (400, gateway_error(11, "etcdserver: mvcc: required revision has been compacted"), False, Compacted),
    (400, gateway_error(11, "etcdserver: mvcc: required revision is a future revision"), False, FutureRevision),
    (404, gateway_error(5, "etcdserver: requested lease not found"), True, LeaseNotFound),
    (400, gateway_error(3, "etcdserver: key is not provided"), True, InvalidArgument),
    (400, gateway_error(3, "etcdserver: duplicate key given in txn request"), True, InvalidArgument),
    (400, gateway_error(3, "etcdserver: too many operations in txn request"), True, TooManyOperations),
    (400, gateway_error(3, "etcdserver: request is too large"), True, RequestTooLarge),
    (429, gateway_error(8, "grpc: received message larger than max (2200010 vs. 2097152)"), True, RequestTooLarge),
    (503, b'{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}}', True, Unavailable),
    (502, b"Bad Gateway", True, OutcomeUnknown),
    (502, b"Bad Gateway", False, Unavailable),
    (418, b"teapot", False, EtcdError),
])
def test_error_answers_map_to_typed_errors(status: int, body: bytes, write: bool, kind: type[EtcdError]) -> None:
    error = decode_error(status, body, write=write, endpoint="http://m1")
    assert type(error) is kind
    assert error.endpoint == "http://m1"
    assert "http://m1" in str(error)


# -- watch lines and the cursor ------------------------------------------------------------------------------------

def event(revision: int, key: str = "k", *, kind: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"kv": {"key": b64(key), "mod_revision": str(revision)}}
    if kind:
        found["type"] = kind
    return found


def watch_line(revision: int, *events: dict[str, Any], **fields: Any) -> bytes:
    result = {"header": {"revision": str(revision)}, **fields}
    if events:
        result["events"] = list(events)
    return json.dumps({"result": result}).encode()


def test_watch_lines_decode_with_their_defaults() -> None:
    created = decode_watch_line(watch_line(3, created=True))
    assert created.created and created.events == () and created.watch_id == 0
    message = decode_watch_line(watch_line(6, event(4), event(6, kind="DELETE")))
    assert [e.type for e in message.events] == [EventType.PUT, EventType.DELETE]
    assert message.events[0].prev_kv is None


def test_a_watch_line_for_a_compacted_start_raises_compacted_with_its_revision() -> None:
    with pytest.raises(Compacted) as raised:
        decode_watch_line(b'{"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"2"}}')
    assert raised.value.compact_revision == 2
    with pytest.raises(WatchCanceled):
        decode_watch_line(b'{"result":{"header":{},"canceled":true,"cancel_reason":"permission denied"}}')
    with pytest.raises(Unavailable):
        decode_watch_line(b'{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}}')
    with pytest.raises(ProtocolError):
        decode_watch_line(b"{}")


def advance(cursor: WatchCursor, line: bytes) -> list[int] | None:
    update = cursor.advance(decode_watch_line(line))
    return None if update is None else [e.kv.mod_revision for e in update.events]


def test_the_cursor_drops_events_already_delivered_and_keeps_a_revision_whole() -> None:
    cursor = WatchCursor.starting_at(4)
    assert cursor.resume_revision == 4
    assert advance(cursor, watch_line(6, event(4), event(5, "a"), event(5, "b"), event(6))) == [4, 5, 5, 6]
    assert cursor.resume_revision == 7
    # A reconnected stream (or a server bug) sends revisions 5 and 6 again, then new ones.
    assert advance(cursor, watch_line(8, event(5, "a"), event(5, "b"), event(6), event(7), event(8))) == [7, 8]
    assert advance(cursor, watch_line(8, event(8))) is None
    assert cursor.duplicates == 4
    assert cursor.delivered == 8


def test_the_cursor_takes_progress_forward_only() -> None:
    cursor = WatchCursor.starting_at(0)
    assert cursor.resume_revision == 0
    cursor.created(decode_watch_line(watch_line(10, created=True)))
    assert cursor.resume_revision == 11
    assert advance(cursor, watch_line(10)) is None  # progress at the revision already reached
    assert advance(cursor, watch_line(12)) == []
    assert cursor.delivered == 12
    assert advance(cursor, watch_line(11)) is None  # a member behind the last one
    assert cursor.delivered == 12
    cursor.created(decode_watch_line(watch_line(20, created=True)))  # a new stream from revision 13
    assert cursor.resume_revision == 13


def test_the_cursor_refuses_events_that_go_back() -> None:
    cursor = WatchCursor.starting_at(1)
    with pytest.raises(OutOfOrder):
        cursor.advance(decode_watch_line(watch_line(6, event(5), event(4))))
    assert cursor.delivered == 0  # nothing of the refused message counts as delivered
