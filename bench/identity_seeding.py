"""Bulk seeding of identities whose MFA posture check times out on a schedule, and waking their actors.

The actors benchmark (T3-T5) and the http benchmark's server (T2: "100k identity actors loaded") need up to a
million identities, each with one API session that passed MFA, a persisted posture state whose MFA deadline falls
at a chosen instant, and one Dial session that the deadline revokes. A request per identity would take hours, so
:func:`seed_mfa_identities` writes the rows directly, tens of thousands per transaction:

* the shared network (one MFA posture check with ``timeoutSeconds``, one service, one Dial service policy linking
  identities to the service by a role attribute and requiring the check, one edge router and the two router
  policies that let sessions use it) is created through the controller's own validation and single write path,
  once per role (a later call with the same role reuses it);
* the first identity, its API session and its Dial session are created with
:func:`controller.data.write_path.create_row`
  too, and become the templates of the others: every further row is a copy with its own id, name, tokens and
  times, written with the index entries :meth:`storage.store.WriteTxn.put` would make for it (from the kinds'
  layouts), one ``putmulti`` per database, without re-running the reference and role checks a million times
  (``tests/bench/test_actors_quick.py`` checks the copies against the indexes, the engine and a session grant);
* each posture state is :func:`controller.posture.state.encode_state` of an :class:`IdentityState` whose one API
  session passed MFA at ``deadline - timeoutSeconds``, with ``deadline`` stored, so that
  :meth:`PostureEngine.run` re-arms it at start and the MFA check starts failing exactly then.

On a cluster node the rows cannot be bulk-loaded (its writes are shipped to etcd, one txn per write, of a bounded
size): there every :data:`_PER_REPLICATED_WRITE` identities are one ordinary write, submitted
:data:`_REPLICATED_IN_FLIGHT` at a time so that the writer batches them (``bench cluster`` seeds 100,000 so).

The seeder writes through the controller's writer (``Writer.submit``), so its writes queue with every other write
and share the one write transaction; each chunk's mutation runs on the Trio thread and holds it: call it before
serving or between measurements, never while latency is being measured. It needs a bootstrapped store (the ``default``
auth policy). It does not touch the in-memory API sessions (:class:`controller.authentication.ApiSessions` loads
the rows when the controller next opens) and does not arm deadlines on a running engine: :func:`wake_all` does that, and
a restart does it for every persisted deadline.
"""

from __future__ import annotations

import math
import secrets
import string
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio
from msgspec.structs import replace

from actors.live_actors import OneShot
from controller.access.grants import access_digest
from controller.authentication.api_sessions import TOKEN_DIGEST, token_digest
from controller.clock import format_time
from controller.data.write_path import create_row
from controller.model.spec import WriteContext
from controller.posture.engine import STATE_KIND
from controller.posture.messages import ReadState
from controller.posture.records import MfaState
from controller.posture.state import IdentityState, SessionPosture, encode_state
from controller.runtime.composition import Controller
from storage.rows import encode
from storage.store import WriteTxn

__all__ = ["MfaNetwork", "SeededLogin", "ensure_network", "seed_mfa_identities", "seed_mfa_logins", "wake_all"]

_PER_REPLICATED_WRITE = 8  # identities per replicated write: their keys (rows and unique values) fit one etcd txn
_REPLICATED_IN_FLIGHT = 64


@dataclass(frozen=True, slots=True)
class MfaNetwork:
    """The rows every seeded identity shares (ids), selected by the role attribute ``role``."""

    role: str
    check_id: str
    service_id: str
    policy_id: str
    router_id: str
    timeout_seconds: int


async def _write(controller: Controller, fn: Callable[[WriteContext], Any]) -> Any:
    """Run ``fn`` through the controller's writer and return its result once durable (re-raising its error)."""
    registry, now, env = controller.registry, controller.clock.now(), controller.domain.env

    def mutation(txn: WriteTxn) -> Any:
        return fn(WriteContext(txn, registry, now, env=env))

    return await controller.writer.submit(mutation)


async def ensure_network(controller: Controller, *, role: str, timeout_seconds: int) -> MfaNetwork:
    """The shared network of ``role``, created on first use through the controller's validation.

    Raises:
        ValueError: the role's MFA check exists with another timeout.
        RuntimeError: the store was never bootstrapped (no ``default`` auth policy).
    """
    if timeout_seconds <= 0:
        raise ValueError("timeout_seconds must be positive: only a timeout gives a deadline")
    domain = controller.domain
    names = {"check": f"{role}-mfa", "service": f"{role}-svc", "policy": f"{role}-dial", "router": f"{role}-er"}
    with controller.store.read() as txn:
        if not txn.exists("auth-policies", "default"):
            raise RuntimeError("bootstrap the controller before seeding (no default auth policy)")
        found = {key: txn.by_unique(kind, "name", names[key]) for key, kind in
                 (("check", "posture-checks"), ("service", "services"), ("policy", "service-policies"),
                  ("router", "edge-routers"))}
        if all(found.values()):
            check = txn.get("posture-checks", str(found["check"])) or {}
            if int(check.get("timeoutSeconds", -1)) != timeout_seconds:
                raise ValueError(f"{names['check']} exists with timeoutSeconds {check.get('timeoutSeconds')}")
            return MfaNetwork(role, str(found["check"]), str(found["service"]), str(found["policy"]),
                              str(found["router"]), timeout_seconds)
    tag = f"#{role}"
    writes = {
        "router": domain.validated_create("edge-routers", {"name": names["router"], "roleAttributes": [role]}),
        "erp": domain.validated_create("edge-router-policies", {
            "name": f"{role}-erp", "semantic": "AnyOf", "identityRoles": [tag], "edgeRouterRoles": [tag]}),
        "serp": domain.validated_create("service-edge-router-policies", {
            "name": f"{role}-serp", "semantic": "AnyOf", "serviceRoles": [tag], "edgeRouterRoles": [tag]}),
        "service": domain.validated_create("services", {
            "name": names["service"], "encryptionRequired": True, "roleAttributes": [role]}),
        # Prompting on wake and unlock makes the benchmark's wake/unlock stream move deadlines as it would live.
        "check": domain.validated_create("posture-checks", {
            "name": names["check"], "typeId": "MFA", "roleAttributes": [role], "timeoutSeconds": timeout_seconds,
            "promptOnWake": True, "promptOnUnlock": True}),
        "policy": domain.validated_create("service-policies", {
            "name": names["policy"], "type": "Dial", "semantic": "AllOf", "identityRoles": [tag],
            "serviceRoles": [tag], "postureCheckRoles": [tag]}),
    }
    ids = await _write(controller, lambda ctx: {key: str(write(ctx)["id"]) for key, write in writes.items()})
    return MfaNetwork(role, ids["check"], ids["service"], ids["policy"], ids["router"], timeout_seconds)


@dataclass(slots=True)
class _Templates:
    """The rows of the first identity, made by the write path, that every further identity copies."""

    identity: dict[str, Any]
    api_session: dict[str, Any]
    session: dict[str, Any]
    state: IdentityState


def _first(ctx: WriteContext, network: MfaNetwork, identity_id: str, name: str,
           passed_at: float, deadline: float, api_token: str) -> _Templates:
    registry = ctx.registry
    identity = create_row(ctx, registry["identities"], {"name": name, "type": "User", "isAdmin": False,
                                                        "roleAttributes": [network.role]}, None, row_id=identity_id)
    api_session = create_row(ctx, registry["api-sessions"], {
        TOKEN_DIGEST: token_digest(api_token), "identityId": identity_id, "authenticatorId": "",
        "ipAddress": "127.0.0.1", "lastActivityAt": format_time(ctx.now), "isMfaRequired": True,
        "isMfaComplete": True}, None, row_id=identity_id + "a")
    session = create_row(ctx, registry["sessions"], {
        "apiSessionId": api_session["id"], "identityId": identity_id, "serviceId": network.service_id,
        "type": "Dial", "token": str(uuid.uuid4()), "servicePolicies": [network.policy_id], "tags": {}}, None,
        row_id=identity_id + "s")
    state = IdentityState(identity_id, sessions={api_session["id"]: SessionPosture(MfaState(passed_mfa_at=passed_at))},
                          last_change_at=passed_at, deadline=deadline, access_digest=access_digest(ctx, identity))
    ctx.txn.put_raw(STATE_KIND, identity_id, encode_state(state))
    return _Templates(identity, api_session, session, state)


def _token(random_hex: str, i: int) -> str:
    """A uuid4-shaped token cut from a block of random hex (``uuid.uuid4()`` per row costs more than the put)."""
    h = random_hex[32 * i:32 * i + 32]
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:]}"


def _copies(templates: _Templates, identity_id: str, name: str, passed_at: float, deadline: float,
            tokens: tuple[str, str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], bytes]:
    """One identity's four rows as copies of the templates: the same shapes, its own ids, tokens and times (the
    posture state encoded, as the engine stores it)."""
    api_session_id = identity_id + "a"
    state = replace(templates.state, identity_id=identity_id, last_change_at=passed_at, deadline=deadline,
                    sessions={api_session_id: SessionPosture(MfaState(passed_mfa_at=passed_at))})
    return ({**templates.identity, "id": identity_id, "name": name},
            {**templates.api_session, "id": api_session_id, TOKEN_DIGEST: token_digest(tokens[0]),
             "identityId": identity_id},
            {**templates.session, "id": identity_id + "s", "apiSessionId": api_session_id,
             "identityId": identity_id, "token": tokens[1]},
            encode_state(state))


async def _store(controller: Controller, rows: dict[str, list[Any]]) -> None:
    """Store new rows (the identities' four kinds, one list per kind, identity ``i``'s rows at ``i`` in each).

    A single controller loads them with :func:`_bulk_store`. A cluster node's writes are shipped to etcd, which
    takes a bounded txn: there every :data:`_PER_REPLICATED_WRITE` identities are one write through the ordinary
    puts, :data:`_REPLICATED_IN_FLIGHT` writes submitted at once so that the writer batches them.
    """
    if controller.cluster is None:
        await _bulk_store(controller, rows)
        return
    kinds = list(rows)
    count = len(rows["identities"])
    limit = trio.CapacityLimiter(_REPLICATED_IN_FLIGHT)

    async def group(begin: int) -> None:
        chunk = [(kind, rows[kind][begin:begin + _PER_REPLICATED_WRITE]) for kind in kinds]
        ids = [str(row["id"]) for row in chunk[0][1]]

        def mutation(txn: WriteTxn) -> None:
            for kind, kind_rows in chunk:
                if kind == STATE_KIND:
                    for identity_id, state in zip(ids, kind_rows, strict=True):
                        txn.put_raw(kind, identity_id, state)
                else:
                    for row in kind_rows:
                        txn.put(kind, row)

        async with limit:
            await controller.writer.submit(mutation)

    async with trio.open_nursery() as nursery:
        for begin in range(0, count, _PER_REPLICATED_WRITE):
            nursery.start_soon(group, begin)


async def _bulk_store(controller: Controller, rows: dict[str, list[Any]]) -> None:
    """Store new rows and their index entries in one durable write, one ``putmulti`` per database.

    The entries are exactly those :meth:`storage.store.WriteTxn.put` makes for a new row (the row by id, and its
    keys in every index of the kind: ``Store.indexes``), without its per-row reads: every id is new by
    construction, and a unique value that is already taken makes the whole transaction fail instead of overwriting
    it. The posture states come encoded, each keyed by its identity (the identities, listed first, in the same
    order).
    """
    store = controller.store
    entries: list[tuple[Any, bool, list[tuple[bytes, bytes]]]] = []
    identity_ids = [str(row["id"]).encode() for row in rows["identities"]]
    for kind, kind_rows in rows.items():
        if kind == STATE_KIND:
            entries.append((store.rows_db(kind), False, list(zip(identity_ids, kind_rows, strict=True))))
            continue
        ids = [str(row["id"]).encode() for row in kind_rows]
        entries.append((store.rows_db(kind), False, [(i, encode(row)) for i, row in zip(ids, kind_rows, strict=True)]))
        for index, db in store.indexes(kind):
            entries.append((db, not index.unique, [(key, i) for i, row in zip(ids, kind_rows, strict=True)
                                                   for key in index.keys(row)]))

    def mutation(txn: WriteTxn) -> None:
        for db, dupsort, items in entries:
            added = txn.put_many(db, items, dupdata=dupsort)
            if added != len(items):
                raise RuntimeError(f"{len(items) - added} seeded keys already existed; nothing was written")

    await controller.writer.submit(mutation)


@dataclass(frozen=True, slots=True)
class SeededLogin:
    """A seeded identity and the token of its API session (``zt-session``), for requests made as it."""

    identity_id: str
    api_token: str


async def seed_mfa_identities(controller: Controller, count: int, *, deadlines_per_second: float, start_in: float,
                        timeout_seconds: int = 3600, role: str = "mfa-bench", gap_every: int = 0, gap: float = 0.0,
                        chunk: int = 20_000) -> list[str]:
    """The ids of :func:`seed_mfa_logins`'s identities (its arguments, in its order)."""
    logins = await seed_mfa_logins(controller, count, deadlines_per_second=deadlines_per_second, start_in=start_in,
                                   timeout_seconds=timeout_seconds, role=role, gap_every=gap_every, gap=gap,
                                   chunk=chunk)
    return [login.identity_id for login in logins]


async def seed_mfa_logins(controller: Controller, count: int, *, deadlines_per_second: float, start_in: float,
                          timeout_seconds: int = 3600, role: str = "mfa-bench", gap_every: int = 0, gap: float = 0.0,
                          chunk: int = 20_000) -> list[SeededLogin]:
    """Create ``count`` identities whose MFA deadlines fall at ``start + i / deadlines_per_second``.

    ``start`` is ``controller.clock.now() + start_in`` when the call begins. With ``gap_every`` > 0 the deadlines
    come in blocks of that many, each block ``gap`` seconds after the end of the previous one. Identity ``i`` (the
    ``i``-th id returned) has the role attribute ``role``, one API session that passed MFA at its deadline minus
    ``timeout_seconds``, one Dial session to the role's service (revoked when the deadline fires), and a persisted
    posture state holding the deadline. Each chunk's write holds the Trio thread while it runs, ``chunk``
    identities per durable write (about 45 µs per identity here: a million in well under a minute).

    Raises:
        ValueError: the timeout is shorter than the time to the last deadline (MFA would be passed in the future).
    """
    if count <= 0:
        return []
    start = controller.clock.now() + start_in
    offsets = [i / deadlines_per_second + (i // gap_every * gap if gap_every > 0 else 0.0) for i in range(count)]
    if start_in + offsets[-1] > timeout_seconds:
        raise ValueError("timeout_seconds must cover start_in plus the spread of the deadlines")
    network = await ensure_network(controller, role=role, timeout_seconds=timeout_seconds)
    run = "".join(secrets.choice(string.ascii_letters) for _ in range(4))
    width = max(6, math.ceil(math.log(count + 1, 16)))
    ids = [f"{run}{i:0{width}x}" for i in range(count)]  # ten characters, like the reference controller's ids
    deadlines = [start + offset for offset in offsets]
    names = [f"{role}-{identity_id}" for identity_id in ids]
    first_token = str(uuid.uuid4())
    templates = await _write(controller, lambda ctx: _first(ctx, network, ids[0], names[0],
                                                      deadlines[0] - timeout_seconds, deadlines[0], first_token))
    logins = [SeededLogin(ids[0], first_token)]
    for begin in range(1, count, chunk):
        kinds: dict[str, list[Any]] = {"identities": [], "api-sessions": [], "sessions": [], STATE_KIND: []}
        end = min(count, begin + chunk)
        random_hex = secrets.token_hex(32 * (end - begin))
        for i in range(begin, end):
            j = 2 * (i - begin)
            api_token = _token(random_hex, j)
            rows = _copies(templates, ids[i], names[i], deadlines[i] - timeout_seconds, deadlines[i],
                           (api_token, _token(random_hex, j + 1)))
            logins.append(SeededLogin(ids[i], api_token))
            for kind_rows, row in zip(kinds.values(), rows, strict=True):
                kind_rows.append(row)
        await _store(controller, kinds)
    return logins


async def wake_all(controller: Controller, ids: Sequence[str], *, batch: int = 2_000) -> None:
    """Bring the actor of every identity in ``ids`` to life and return once each has parked on its deadline.

    Each identity is asked :class:`ReadState`: its actor spawns, loads the persisted state and, once it has
    answered, parks with that state's deadline armed (a deadline already past fires at once and revokes, as after a
    restart). ``batch`` identities are in flight at a time, so the other tasks (requests, the scheduler) keep
    running while a million actors start. Call :func:`controller.runtime.memory.settle` afterwards: the actors are
    long-lived.
    """
    engine = controller.engine
    for begin in range(0, len(ids), batch):
        replies: list[OneShot[Any]] = []
        for identity_id in ids[begin:begin + batch]:
            reply: OneShot[Any] = OneShot()
            engine.post(identity_id, ReadState(reply))
            replies.append(reply)
        for reply in replies:
            await reply.receive()
        await trio.lowlevel.checkpoint()
