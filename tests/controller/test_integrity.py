"""The data-integrity check and fix (``controller/maintenance/integrity.py``, ``storage/index_audit.py``) on a store
damaged on purpose, without Trio: each kind of damage is reported, the fix repairs it through the write path, and a
second check is clean; what cannot be repaired safely is reported and left alone.

Damage is made the way it happens in real life: writes that bypass the write path (a put that checks no reference),
and raw LMDB writes that bypass the store's index maintenance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.data.write_path import create_row
from controller.maintenance.integrity import (
    DeleteOrphan,
    DeleteRow,
    DropListEntry,
    Problem,
    RemoveIndexEntry,
    RestoreIndexEntry,
    SetField,
    check_all,
    check_chunk,
    repair,
)
from controller.model.spec import ReadContext, WriteContext
from controller.posture.engine import STATE_KIND
from controller.posture.state import IdentityState, encode_state
from controller.resources.catalog import build_registry
from controller.resources.sessions import DEFAULT_AUTH_POLICY
from storage.batch import run_batch
from storage.rows import decode_row, encode
from storage.store import Store

REGISTRY = build_registry()
NOW = 1_700_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "db", REGISTRY.layouts(), durable=False)
    yield opened
    opened.close()


def _write(store: Store, fn: Callable[[WriteContext], Any]) -> Any:
    [outcome] = run_batch(store, [lambda txn: fn(WriteContext(txn, REGISTRY, NOW))])
    return outcome.unwrap()


def _check(store: Store, limit: int = 256) -> list[Problem]:
    with store.read() as txn:
        return check_all(ReadContext(txn, REGISTRY, NOW), limit)


def _fix(store: Store, problems: list[Problem]) -> list[bool]:
    """Each repair in its own mutation of one batch, as the database service runs them."""
    def mutation(problem: Problem) -> Callable[[Any], bool]:
        return lambda txn: repair(WriteContext(txn, REGISTRY, NOW), problem)
    return [outcome.unwrap() for outcome in run_batch(store, [mutation(p) for p in problems])]


def _create(ctx: WriteContext, kind: str, body: dict[str, Any], row_id: str | None = None) -> str:
    return str(create_row(ctx, REGISTRY[kind], body, None, row_id)["id"])


def _seed(store: Store) -> dict[str, str]:
    """A small consistent model: an identity with an API session and a session of a service a policy grants."""
    def seed(ctx: WriteContext) -> dict[str, str]:
        _create(ctx, "auth-policies", DEFAULT_AUTH_POLICY, "default")
        alice = _create(ctx, "identities", {"name": "alice", "type": "User", "isAdmin": False,
                                            "roleAttributes": ["staff"]}, "alice")
        service = _create(ctx, "services", {"name": "web", "encryptionRequired": True, "roleAttributes": ["web"]},
                          "web")
        policy = _create(ctx, "service-policies", {"name": "dial-web", "type": "Dial", "semantic": "AllOf",
                                                   "identityRoles": ["@alice"], "serviceRoles": ["#web"]}, "dial")
        api = _create(ctx, "api-sessions", {"identityId": alice, "_tokenSha256": "digest", "authenticatorId": "a"},
                      "api1")
        session = _create(ctx, "sessions", {"apiSessionId": api, "identityId": alice, "serviceId": service,
                                            "type": "Dial", "token": "t", "servicePolicies": [policy]}, "ses1")
        return {"alice": alice, "service": service, "policy": policy, "api": api, "session": session}
    ids: dict[str, str] = _write(store, seed)
    return ids


def _raw(store: Store, fn: Callable[[Any], Any]) -> None:
    """A raw LMDB write, below the store's index maintenance (what a disk fault or an old bug leaves)."""
    with store.env.begin(write=True) as txn:
        fn(txn)


def _put_unchecked(store: Store, kind: str, row: dict[str, Any]) -> None:
    """A row put by the store (its indexes in step) but past the write path (no reference is checked)."""
    _write(store, lambda ctx: ctx.txn.put(kind, row))


def _damage(store: Store) -> None:
    """The five kinds of damage the brief names, one each."""
    # A row missing from its index: alice's name is no longer found by name.
    _raw(store, lambda txn: txn.delete(b"alice", db=store.index_db("u", "identities", "name")))
    # An index entry without its row: a role attribute names an identity that does not exist.
    _raw(store, lambda txn: txn.put(b"ghosts", b"nobody", db=store.index_db("s", "identities", "roleAttributes")))
    # A dangling reference: a policy selects an identity by id that does not exist.
    _put_unchecked(store, "service-policies", {
        "id": "stale", "name": "stale", "type": "Bind", "semantic": "AnyOf", "identityRoles": ["@gone", "#staff"],
        "serviceRoles": ["@web"], "postureCheckRoles": [], "tags": {}, "createdAt": "", "updatedAt": ""})
    # A session whose API session does not exist.
    _put_unchecked(store, "sessions", {
        "id": "orphan-session", "apiSessionId": "ended", "identityId": "alice", "serviceId": "web", "type": "Bind",
        "token": "u", "servicePolicies": [], "tags": {}, "createdAt": "", "updatedAt": ""})
    # Posture state of an identity that does not exist.
    _write(store, lambda ctx: ctx.txn.put_raw(STATE_KIND, "ghost", encode_state(IdentityState("ghost"))))


EXPECTED = {
    "identities row alice is missing from index u/identities/name (value 'alice')",
    "index s/identities/roleAttributes maps 'ghosts' to identities row nobody, which does not exist",
    "service-policies row stale: identityRoles selects @gone, but identities row gone does not exist",
    "sessions row orphan-session: apiSessionId names api-sessions row ended, which does not exist",
    "posture-state row ghost belongs to identities row ghost, which does not exist",
}


def test_a_consistent_store_has_no_problems(store: Store) -> None:
    _seed(store)
    assert _check(store) == []


def test_each_kind_of_damage_is_reported_fixed_and_gone_from_a_second_check(store: Store) -> None:
    _seed(store)
    _damage(store)

    problems = _check(store)
    assert {p.description for p in problems} == EXPECTED
    assert len(problems) == len(EXPECTED)
    assert {type(p.repair) for p in problems} == {RestoreIndexEntry, RemoveIndexEntry, DropListEntry, DeleteRow,
                                                  DeleteOrphan}

    assert _fix(store, problems) == [True] * len(problems)
    assert _check(store) == []
    with store.read() as txn:
        assert txn.by_unique("identities", "name", "alice") == "alice"
        assert txn.ids_by_set("identities", "roleAttributes", "ghosts") == []
        stale = txn.get("service-policies", "stale")
        assert stale is not None and stale["identityRoles"] == ["#staff"]
        assert txn.ids_by_set("service-policies", "identityRoles", "@gone") == []
        assert not txn.exists("sessions", "orphan-session")
        assert txn.ids_by_ref("sessions", "identityId", "alice") == ["ses1"]
        assert txn.get_raw(STATE_KIND, "ghost") is None


def test_a_chunked_check_finds_what_one_pass_finds(store: Store) -> None:
    _seed(store)
    _damage(store)
    # Stray entries in a dupsort index beside good ones, so that chunks resume inside a key's ids.
    sets = store.index_db("s", "identities", "roleAttributes")
    _raw(store, lambda txn: [txn.put(b"staff", value, db=sets) for value in (b"a0", b"zz", b"alicf")])
    whole = [p.description for p in _check(store)]
    assert len(whole) == len(EXPECTED) + 3
    for limit in (1, 2, 3):
        assert [p.description for p in _check(store, limit)] == whole

    with store.read() as txn:
        ctx = ReadContext(txn, REGISTRY, NOW)
        found, position, chunks = [], None, 0
        while True:
            problems, position = check_chunk(ctx, position, 1)
            found += problems
            chunks += 1
            if position is None:
                break
    assert [p.description for p in found] == whole
    assert chunks > len(REGISTRY.resources)


def test_a_reference_is_repaired_as_deleting_its_row_would_have(store: Store) -> None:
    ids = _seed(store)
    # The identity goes without its cascade: its API session, its session and its policy selector stay behind.
    _raw(store, lambda txn: txn.delete(b"alice", db=store.rows_db("identities")))
    _raw(store, lambda txn: txn.delete(b"alice", db=store.index_db("u", "identities", "name")))
    _raw(store, lambda txn: txn.delete(b"staff", b"alice", db=store.index_db("s", "identities", "roleAttributes")))
    _raw(store, lambda txn: txn.delete(b"default", b"alice", db=store.index_db("f", "identities", "authPolicyId")))

    problems = _check(store)
    assert {p.description for p in problems} == {
        "service-policies row dial: identityRoles selects @alice, but identities row alice does not exist",
        "api-sessions row api1: identityId names identities row alice, which does not exist",
        "sessions row ses1: identityId names identities row alice, which does not exist",
    }
    changes: list[Any] = []

    def fix_all(ctx: WriteContext) -> list[bool]:
        done = [repair(ctx, p) for p in problems]
        changes.extend((c.kind, c.id, c.after is None) for c in ctx.changes)
        return done

    assert _write(store, fix_all) == [True, True, True]
    # Deleted through the write path: the API session's session went with it, and the listeners are told.
    assert ("api-sessions", ids["api"], True) in changes and ("sessions", ids["session"], True) in changes
    assert _check(store) == []
    with store.read() as txn:
        policy = txn.get("service-policies", "dial")
        assert policy is not None and policy["identityRoles"] == []
        assert txn.count("api-sessions") == 0 and txn.count("sessions") == 0


def test_refuse_references_take_their_default_or_are_left_to_the_operator(store: Store) -> None:
    _seed(store)
    _write(store, lambda ctx: _create(ctx, "config-types", {"name": "intercept", "schema": {}}, "ct"))
    _put_unchecked(store, "identities", {
        "id": "bob", "name": "bob", "type": "User", "isAdmin": False, "authPolicyId": "retired", "roleAttributes": [],
        "tags": {}, "createdAt": "", "updatedAt": ""})
    _put_unchecked(store, "configs", {"id": "cfg", "name": "cfg", "configTypeId": "lost", "data": {}, "tags": {},
                                      "createdAt": "", "updatedAt": ""})
    _put_unchecked(store, "services", {"id": "svc2", "name": "svc2", "configs": ["cfg", "nothing"],
                                       "roleAttributes": [], "tags": {}, "createdAt": "", "updatedAt": ""})

    problems = {p.description: p for p in _check(store)}
    reset = problems["identities row bob: authPolicyId names auth-policies row retired, which does not exist"]
    assert reset.repair == SetField("identities", "bob", "authPolicyId", "auth-policies", "retired", "default")
    stuck = problems["configs row cfg: configTypeId names config-types row lost, which does not exist"]
    assert stuck.repair is None
    listed = problems["services row svc2: configs lists configs row nothing, which does not exist"]
    assert listed.repair == DropListEntry("services", "svc2", "configs", "nothing", "configs", "nothing")
    assert len(problems) == 3

    fixed = dict(zip(problems, _fix(store, list(problems.values())), strict=True))
    assert fixed == {reset.description: True, stuck.description: False, listed.description: True}
    assert [p.description for p in _check(store)] == [stuck.description]
    with store.read() as txn:
        bob = txn.get("identities", "bob")
        service = txn.get("services", "svc2")
        assert bob is not None and bob["authPolicyId"] == "default"
        assert service is not None and service["configs"] == ["cfg"]


def test_two_rows_holding_one_unique_value_are_left_to_the_operator(store: Store) -> None:
    _seed(store)
    _write(store, lambda ctx: _create(ctx, "identities", {"name": "carol", "type": "User", "isAdmin": False},
                                      "carol"))

    def rename_carol(txn: Any) -> None:
        rows = store.rows_db("identities")
        carol = decode_row(txn.get(b"carol", db=rows))
        txn.put(b"carol", encode({**carol, "name": "alice"}), db=rows)

    _raw(store, rename_carol)  # carol now says "alice", past the unique index, which still maps "carol" to her

    problems = _check(store)
    assert [p.description for p in problems] == [
        "identities rows carol and alice hold the same u/identities/name value 'alice', which must be unique",
        "index u/identities/name maps 'carol' to identities row carol, which does not hold that value",
    ]
    assert problems[0].repair is None
    assert _fix(store, problems) == [False, True]
    assert [p.description for p in _check(store)] == [problems[0].description]


def test_a_repair_rechecks_and_leaves_what_changed_since_the_check(store: Store) -> None:
    _seed(store)
    _raw(store, lambda txn: txn.delete(b"alice", db=store.index_db("u", "identities", "name")))
    _write(store, lambda ctx: ctx.txn.put_raw(STATE_KIND, "newcomer", encode_state(IdentityState("newcomer"))))
    problems = _check(store)
    assert len(problems) == 2

    # Meanwhile the identity is created and alice's row is written again (which restores her index entry).
    def meanwhile(ctx: WriteContext) -> None:
        _create(ctx, "identities", {"name": "newcomer", "type": "User", "isAdmin": False}, "newcomer")
        alice = ctx.txn.get("identities", "alice")
        assert alice is not None
        ctx.txn.put("identities", alice)

    _write(store, meanwhile)
    assert _fix(store, problems) == [True, True]
    with store.read() as txn:
        assert txn.get_raw(STATE_KIND, "newcomer") is not None  # its identity exists now: kept
        assert txn.by_unique("identities", "name", "alice") == "alice"
    assert _check(store) == []


@pytest.mark.parametrize("limit", [1, 2, 256])
def test_fixing_chunk_by_chunk_resumes_after_what_it_removed(store: Store, limit: int) -> None:
    """As the database service runs a fix: each chunk's problems are repaired before the next chunk is read, so a
    chunk resumes after an index entry (or a row) the previous repair removed."""
    _seed(store)
    _damage(store)
    sets = store.index_db("s", "identities", "roleAttributes")
    names = store.index_db("u", "identities", "name")
    _raw(store, lambda txn: [txn.put(b"staff", value, db=sets) for value in (b"a0", b"zz", b"alicf")])
    _raw(store, lambda txn: [txn.put(key, b"nobody", db=names) for key in (b"n1", b"n2", b"zed")])
    expected = [p.description for p in _check(store)]
    assert len(expected) == len(EXPECTED) + 6

    found: list[str] = []
    position = None
    while True:
        with store.read() as txn:
            problems, position = check_chunk(ReadContext(txn, REGISTRY, NOW), position, limit)
        assert all(_fix(store, problems))
        found += [p.description for p in problems]
        if position is None:
            break
    assert found == expected
    assert _check(store) == []


def test_an_unreadable_row_is_reported_and_its_index_entries_are_not_stray(store: Store) -> None:
    _seed(store)
    _raw(store, lambda txn: txn.put(b"alice", b"\xc1", db=store.rows_db("identities")))  # not msgpack any more
    problems = _check(store)
    assert [p.description.split(" (")[0] for p in problems] == ["identities row alice cannot be decoded"]
    assert problems[0].repair is None
    assert _fix(store, problems) == [False]


def test_an_index_repair_renews_the_memos_of_answers_derived_from_its_kind(store: Store) -> None:
    _seed(store)
    roles = store.index_db("s", "service-policies", "identityRoles")
    _raw(store, lambda txn: txn.put(b"@someone", b"dial", db=roles))  # "dial" does not select @someone
    with store.read() as txn:
        assert txn.shared_memo() is not None
    before = store.memo_token()
    problems = _check(store)
    assert [p.description for p in problems] == [
        "index s/service-policies/identityRoles maps '@someone' to service-policies row dial, which does not hold "
        "that value"]
    assert _fix(store, problems) == [True]
    # Policy links remembered from before the repair would still see the stray entry.
    assert store.memo_token() is not before
    with store.read() as txn:
        assert txn.ids_by_set("service-policies", "identityRoles", "@someone") == []
