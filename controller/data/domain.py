"""The domain facade the web layer calls: reads on a snapshot, writes through the group-commit writer.

Request handlers never touch storage directly. A write is a synchronous function of a :class:`WriteContext`; it runs
in the writer's transaction and its recorded changes are published to subscribers after the commit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from controller.clock import Clock
from controller.data.group_commit import Writer
from controller.data.listing import NO_LIMIT, ListParams, Page, compile_query, list_rows, page_values
from controller.data.present import present
from controller.data.write_path import create_row, delete_row, replace_row
from controller.errors import not_found
from controller.model.events import AUTHOR, Author, Event
from controller.model.field import Mode
from controller.model.registry import Registry
from controller.model.spec import Change, Environment, ReadContext, Resource, WriteContext
from controller.model.validation import validate_body
from storage.batch import Outcome
from storage.store import ReadTxn, Store, WriteTxn
from storage.zitiql import FieldType, Symbol

__all__ = ["Barrier", "ChangeListener", "Domain", "Journal"]

T = TypeVar("T")
# A listener may return a barrier: a function whose awaitable the write's caller awaits before it is answered.
Barrier = Callable[[], Awaitable[None]]
ChangeListener = Callable[[list[Change]], Barrier | None]
_ATTRIBUTE_SYMBOLS = {"id": Symbol(FieldType.STRING)}


class Journal(Protocol):
    """What keeps the events of every write (``controller.insight.EventLog``): it stores them in the write's own
    transaction and publishes them once that has committed."""

    def record(self, ctx: WriteContext) -> object | None:
        """In the write's transaction, after its function ran: store the events ``ctx`` recorded and those its
        changes make; returns what :meth:`committed` is given after the commit (None: nothing to publish)."""

    def committed(self, recorded: object) -> None:
        """The write that :meth:`record` returned ``recorded`` for is durable (on the writer's task; quick)."""


class Domain:
    """Generic resource operations over one store."""

    def __init__(self, store: Store, writer: Writer, registry: Registry, clock: Clock, *,
                 env: Environment | None = None, hash_secret: Callable[[str], Awaitable[str]] | None = None,
                 journal: Journal | None = None) -> None:
        """Args:
            store: the rows.
            writer: the group commit every write goes through.
            registry: every kind's spec.
            clock: the controller's clock (``ReadContext.now``).
            env: what hooks may need from the running controller beyond the store (``ReadContext.env``); None
                for a store used without a controller, as some benchmarks do.
            hash_secret: hashes a secret a field declares (``Field.hashed_into``), off the event loop; None when
                no kind with a secret is written.
            journal: keeps every write's events (None: events are off, and nothing records them).
        """
        self.store = store
        self.writer = writer
        self.registry = registry
        self.clock = clock
        self.env = env
        self.hash_secret = hash_secret
        self.journal = journal
        self._listeners: list[ChangeListener] = []

    def subscribe(self, listener: ChangeListener, kinds: Iterable[str] | None = None) -> None:
        """Call ``listener`` with the changes of every committed write, on the writer's task right after the commit
        (whether or not the write's caller still waits); with ``kinds``, only with the changes to rows of those
        kinds, and only for writes that have some. It must not block; what the caller must wait for it returns as a
        barrier.

        Raises:
            ValueError: ``kinds`` names a kind the registry does not know.
        """
        if kinds is None:
            self._listeners.append(listener)
            return
        wanted = frozenset(kinds)
        unknown = wanted - self.registry.resources.keys() - self.registry.internal.keys()
        if unknown:
            raise ValueError(f"no such kinds: {sorted(unknown)}")

        def relevant(changes: list[Change]) -> Barrier | None:
            mine = [change for change in changes if change.kind in wanted]
            return listener(mine) if mine else None

        self._listeners.append(relevant)

    def read(self) -> _Reading:
        """A read snapshot (``with domain.read() as ctx``); never hold it across an ``await``."""
        return _Reading(self)

    async def write(self, fn: Callable[[WriteContext], T], *, conditions: Sequence[object] = ()) -> T:
        """Run ``fn`` in the next group commit and return its result once it is durable.

        ``fn`` may run more than once before that (``controller/data/commit_step.py``): it must derive everything
        from the context it is given. ``conditions``: what a cluster's shared store must find true for the write to
        commit (else it raises :class:`~controller.data.commit_step.ConditionFailed`); a single node takes none.
        """
        mutation = _Mutation(fn, self.registry, self.clock.now(), self._listeners, self.env, self.journal)
        # Listeners are told on the writer's task right after the commit, even when this caller has been cancelled
        # meanwhile: a committed write whose listeners never ran would leave derived state (API-session caches,
        # sessions to re-evaluate) behind the data.
        result: T = await self.writer.submit(mutation, on_commit=mutation.committed, conditions=conditions)
        # A listener may return a barrier: the write is not answered until it completes (the posture engine uses
        # this so that a policy change has re-evaluated every affected session before the PATCH returns). A
        # function rather than a coroutine, so that one whose caller has gone is simply dropped.
        for barrier in mutation.pending:
            await barrier()
        return result

    def post_write(self, fn: Callable[[WriteContext], Any], on_done: Callable[[Outcome], None], *,
                   conditions: Sequence[object] = ()) -> None:
        """Queue ``fn`` for the next group commit without waiting for it
        (:meth:`controller.data.group_commit.Writer.post`): ``on_done`` gets its outcome on the writer's task once
        it is durable (or failed), after the listeners have been told of its changes. A barrier a listener returns
        is not awaited: nobody waits for this write."""
        mutation = _Mutation(fn, self.registry, self.clock.now(), self._listeners, self.env, self.journal)
        self.writer.post(mutation, on_done, on_commit=mutation.committed, conditions=conditions)

    def publish(self, changes: list[Change]) -> None:
        """Tell every listener of changes that reached the store without a write of this domain (another node's
        writes, applied to this node's replica), as for a committed write; nobody waits for a barrier they return."""
        if changes:
            for listener in self._listeners:
                listener(changes)

    async def record(self, *events: Event) -> None:
        """Record ``events``, which describe something that changed no row (a refused login), in a write of their
        own; returns once they are durable. Does nothing when events are off."""
        if self.journal is None or not events:
            return

        def write(ctx: WriteContext) -> None:
            for event in events:
                ctx.record(event)

        await self.write(write)

    # Generic resource operations -----------------------------------------------------------------------------

    def list_page(self, kind: str, params: ListParams, candidates: Iterable[str] | None = None,
                  fields: frozenset[str] | None = None) -> tuple[list[Any], dict[str, Any]]:
        """A page of ``kind`` and its ``meta``; ``fields``: the only symbols a filter or sort may name (a view
        that shows only those fields must not let a filter probe the others)."""
        resource = self.registry[kind]
        with self.read() as ctx:
            symbols = ctx.registry.symbols(kind)
            if fields is not None:
                symbols = {name: symbol for name, symbol in symbols.items() if name in fields}
            page: Page = list_rows(ctx, resource, params, candidates, symbols)
            return [present(ctx, resource, row) for row in page.rows], page.meta

    def detail(self, kind: str, row_id: str) -> dict[str, Any]:
        resource = self.registry[kind]
        with self.read() as ctx:
            row = ctx.txn.get(kind, row_id)
            if row is None:
                raise not_found(resource.singular, row_id)
            return present(ctx, resource, row)

    def exists(self, kind: str, row_id: str) -> bool:
        with self.store.read() as txn:
            return txn.exists(kind, row_id)

    def validated_create(self, kind: str, body: Any) -> Callable[[WriteContext], dict[str, Any]]:
        """Validate a create body now; returns the write that stores it (raises ApiError for a bad body).

        :meth:`create` runs the write in the next group commit; a bulk load may run many in one transaction. A
        body carrying a secret to hash (a password) goes through :meth:`create`, which hashes it off the event
        loop; here it is refused (ValueError).
        """
        resource = self.registry[kind]
        body = _prepared(resource, body, Mode.CREATE)
        variant = validate_body(resource, body, Mode.CREATE)
        clean = _normalized(resource, body, Mode.CREATE)
        if any(f.hashed_into and f.name in clean for f in resource.fields):
            raise ValueError(f"a {kind} body with a secret is created with Domain.create, which hashes it")
        return lambda ctx: create_row(ctx, resource, clean, variant)

    async def create(self, kind: str, body: Any) -> dict[str, Any]:
        resource = self.registry[kind]
        body = _prepared(resource, body, Mode.CREATE)
        variant = validate_body(resource, body, Mode.CREATE)
        clean = await self._hashed(resource, _normalized(resource, body, Mode.CREATE))
        row = await self.write(lambda ctx: create_row(ctx, resource, clean, variant))
        with self.read() as ctx:
            return present(ctx, resource, row)

    async def _hashed(self, resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with each secret a field declares (``Field.hashed_into``) replaced by its hash, computed by
        ``hash_secret`` (bounded and off the event loop)."""
        for f in resource.fields:
            secret = body.get(f.name)
            if f.hashed_into is None or secret is None:
                continue
            if self.hash_secret is None:
                raise RuntimeError("secrets need the hash_secret a Domain is built with")
            body = {k: v for k, v in body.items() if k != f.name}
            body[f.hashed_into] = await self.hash_secret(str(secret))
        return body

    async def replace(self, kind: str, row_id: str, body: Any, mode: Mode) -> None:
        resource = self.registry[kind]
        stored_variant = None
        if resource.variants is not None:
            with self.store.read() as txn:
                old = txn.get(kind, row_id)
            if old is None:
                raise not_found(resource.singular, row_id)
            stored_variant = old.get(resource.variants.discriminator)
            name = resource.variants.discriminator
            if mode is Mode.UPDATE and isinstance(body, dict) and body.get(name) is None:
                # A PUT without the discriminator keeps the stored one; the kind's accepted spellings need it.
                body = {**body, name: stored_variant}
        body = _prepared(resource, body, mode)
        variant = validate_body(resource, body, mode, stored_variant)
        clean = await self._hashed(resource, _normalized(resource, body, mode))
        await self.write(lambda ctx: replace_row(ctx, resource, row_id, clean, mode, variant))

    async def delete(self, kind: str, row_id: str) -> None:
        resource = self.registry[kind]
        await self.write(lambda ctx: delete_row(ctx, resource, row_id))

    def role_attributes(self, kind: str, filter_text: str | None) -> tuple[list[str], dict[str, Any]]:
        """Role attributes in use by ``kind``, sorted, filtered on the symbol ``id`` (the attribute itself)."""
        query = compile_query(filter_text, _ATTRIBUTE_SYMBOLS)
        with self.store.read() as txn:
            values = txn.set_elements(kind, "roleAttributes")
        matched = [v for v in values if query.predicate({"id": v})]
        if query.sort and query.sort[0].descending:
            matched.reverse()
        # The reference ignores limit/offset query parameters here; only a limit inside the filter applies.
        limit, offset = page_values(query.limit, query.skip, ListParams())
        if query.limit is None:
            limit = -1
        window = matched[offset:] if limit == -1 else matched[offset:offset + limit]
        meta = {"filterableFields": ["id"], "pagination": {"limit": NO_LIMIT if limit == -1 else limit,
                                                          "offset": offset, "totalCount": len(matched)}}
        return window, meta


def _prepared(resource: Resource, body: Any, mode: Mode) -> Any:
    """Drop internal keys a client may not set, then apply the kind's accepted spellings."""
    if not isinstance(body, dict):
        return body
    clean = {k: v for k, v in body.items() if not k.startswith("_")}
    return resource.hooks.prepare(clean, mode) if resource.hooks.prepare is not None else clean


def _normalized(resource: Resource, body: dict[str, Any], mode: Mode) -> dict[str, Any]:
    if resource.hooks.normalize is None:
        return body
    return resource.hooks.normalize(dict(body), mode)


class _Mutation:
    """What :meth:`Domain.write` submits: runs ``fn`` in a :class:`WriteContext` and keeps the changes it recorded.

    A slotted object rather than a closure: one is alive for every write waiting for its commit (under load, every
    actor step), and a closure with its cells is five objects for the garbage collector to traverse, this one.

    Its author is the one of the task that queues it (:data:`controller.model.events.AUTHOR`): a request's, or
    None for the controller's own writes."""

    __slots__ = ("author", "changes", "env", "fn", "journal", "listeners", "now", "pending", "recorded", "registry")

    def __init__(self, fn: Callable[[WriteContext], Any], registry: Registry, now: float,
                 listeners: list[ChangeListener], env: Environment | None, journal: Journal | None) -> None:
        self.fn = fn
        self.env = env
        self.registry = registry
        self.now = now
        self.listeners = listeners
        self.journal = journal
        self.author: Author | None = AUTHOR.get()
        self.changes: list[Change] | tuple[()] = ()
        self.pending: list[Barrier] | tuple[()] = ()
        self.recorded: object | None = None

    def __call__(self, txn: WriteTxn) -> Any:
        ctx = WriteContext(txn, self.registry, self.now, env=self.env, author=self.author)
        # A run again (after another node wrote first) keeps only its own changes and events.
        self.changes = ()
        self.recorded = None
        result = self.fn(ctx)
        if ctx.changes:
            self.changes = ctx.changes
        journal = self.journal
        # In the same transaction as the changes they describe: a write that rolls back takes its events along.
        if journal is not None and (ctx.changes or ctx.events):
            self.recorded = journal.record(ctx)
        return result

    def committed(self) -> None:
        """The write is durable: publish its events, then tell every listener about its changes, keeping what they
        ask to be awaited."""
        journal, recorded = self.journal, self.recorded
        if journal is not None and recorded is not None:
            journal.committed(recorded)
        if not self.changes:
            return
        pending = []
        for listener in self.listeners:
            done = listener(self.changes)
            if done is not None:
                pending.append(done)
        self.pending = pending


class _Reading:
    """What :meth:`Domain.read` returns; a class, not a generator-based context manager, for the reason given on
    :class:`storage.store.Reading` (every actor step and request opens one)."""

    __slots__ = ("_domain", "_reader")

    def __init__(self, domain: Domain) -> None:
        self._domain = domain
        self._reader: ReadTxn | None = None

    def __enter__(self) -> ReadContext:
        domain = self._domain
        txn = self._reader = domain.store.begin_read()
        return ReadContext(txn, domain.registry, domain.clock.now(), shared=txn.shared_memo(), env=domain.env)

    def __exit__(self, *exc: object) -> None:
        reader, self._reader = self._reader, None
        assert reader is not None
        reader.end()
