"""Routing what callers ask of identities' actors to the node that hosts them.

:class:`RoutedPosture` is the posture service of a cluster node: a posture report, a session request, an MFA pass
or removal, or a read of an identity's state goes to this node's engine when this node owns the identity's shard
(``controller/cluster/ownership.py``), else to the owner over the internal channel, and the caller gets the answer
(or the error) the owner's engine gave, as a single node would give it. While nobody holds the shard (its owner
died and its lease has not expired yet, or it is being handed on), the call waits for a holder, at most
:attr:`RoutedPosture.within` seconds, then answers 503 ``CLUSTER_UNAVAILABLE``. An owner that lost the shard
meanwhile answers "moved" and the call is routed again. A call that never left this node whole (its link broke
first) is sent again at once, once, over a new link. One the owner may have run (the link broke after the call
left, or the owner did not answer in time) is never sent under that owner's claim again: it waits for the shard to
change hands (the owner died, or let the shard go and took it back with a new claim), and answers 503 ``applied:
unknown`` if it does not in time. The next holder runs it, so a call
whose first owner ran it and died before answering has run on both (the first one's writes stand if they committed
before its fence was taken).

**The internal channel.** A WebSocket to each other node's own listener (its address in its membership record), many
calls in flight on each (``controller/cluster/channel.py``; ``web/internal_channel.py`` serves it). Each call is
signed (``controller/cluster/call_signing.py``), and so is the link's opening request: a call whose signature does
not verify is refused (401) before anything is decoded. Over TLS the node also checks the peer's certificate against
the network CA. A forwarded call names the revision the forwarding node's replica held when it sent it, past that
node's own read barrier; the owner waits until its replica has applied every write up to there before it acts (no
quorum read of its own), so it sees every write acknowledged before the client's request arrived (the login just
made on the forwarding node, say). The state the forwarding node's own actors wrote is left out: it is of identities
the owner does not host.

**Re-checks elsewhere.** A write that makes identities re-check their sessions (a policy, a posture check, an
identity's roles) is answered once every node has: the node that committed it waits for its own actors, then sends
``settle`` (no identity; the write's revision, and which identities, or every live one) to the other nodes holding
the shards concerned. Each applies up to that revision (its actors are told of the write then) and answers, once
the identities it hosts have re-checked, durably, with the shards it hosted throughout. A shard whose holder stopped,
died or handed it on meanwhile is asked again of its next holder, which re-checked the identities it adopted
(:meth:`RoutedPosture.recheck_elsewhere`). What is not settled within :attr:`RoutedPosture.within` is logged and not
waited for.
"""

from __future__ import annotations

import base64
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import msgspec
import trio

from controller.cluster import call_signing
from controller.cluster.channel import ChannelLinks, Unanswered
from controller.cluster.membership import Membership
from controller.cluster.ownership import ShardOwnership
from controller.cluster.shards import SHARDS, shard_of
from controller.data.commit_step import ConditionFailed
from controller.errors import ApiError, nested_cause
from controller.posture.service import Moved, PostureService
from controller.posture.state import IdentityState, decode_state, encode_state

__all__ = ["HostedEngine", "RoutedPosture"]

log = logging.getLogger("tollgate.cluster")

_MOVED = 409
_SETTLE = "settle"  # the call that is about no one identity: re-checks of a write (RoutedPosture.recheck_elsewhere)
_CONNECT_TIMEOUT = 1.0
_SETTLE_RETRY = 0.5  # seconds before a holder that did not settle a write's shards is asked again


class Causality(Protocol):
    """What forwarding needs of the node's read barrier (``controller/cluster/freshness.py``)."""

    @property
    def position(self) -> int:
        """A revision up to which another node's replica must have applied every write to hold all this node's
        replica holds, but the state this node's own actors wrote."""

    def reached(self, revision: int) -> bool:
        """Whether this node's replica has applied every write up to ``revision``."""

    async def wait_revision(self, revision: int) -> None:
        """Return once this node's replica has applied every write up to ``revision`` (or its wait gave up)."""


class _Call(msgspec.Struct, frozen=True):
    op: str
    identity_id: str
    args: dict[str, Any]
    revision: int = 0  # the forwarding node's replica position: what the owner must have applied first


class HostedEngine(PostureService, Protocol):
    """This node's engine, as the routing uses it."""

    async def settle_hosted(self, identity_ids: Iterable[str] | None) -> set[str]:
        """Return once the identities this node hosts among ``identity_ids`` (None: every live one) have handled
        every message posted before, their writes durable; the identities that left this node meanwhile."""


class _Unreachable(Exception):
    """The owner did not answer (it died, or is paused): wait for the shard's next holder. ``sent``: the call may
    have reached it, and run."""

    def __init__(self, why: str, *, sent: bool) -> None:
        super().__init__(why)
        self.sent = sent


class RoutedPosture:
    """A cluster node's :class:`~controller.posture.service.PostureService`.

    Args:
        local: this node's engine.
        ownership: who holds which shard.
        membership: where each node is reached.
        causality: the node's read barrier.
        key: :func:`forwarding_key` of the network.
        within: seconds a call waits for a shard to have a holder.
        ca_pem: the network CA, which owners' certificates must chain to (over TLS).
    """

    def __init__(self, local: HostedEngine, ownership: ShardOwnership, membership: Membership,
                 causality: Causality, key: bytes, *, within: float, ca_pem: bytes) -> None:
        self._local = local
        self._ownership = ownership
        self._membership = membership
        self._causality = causality
        self._key = key
        self.within = within
        tls = ssl.create_default_context(cadata=ca_pem.decode("ascii"))
        tls.check_hostname = False  # a node is reached by whatever address it announced; the CA is checked
        self._links = ChannelLinks(tls, self._signature, connect_timeout=_CONNECT_TIMEOUT)
        self.forwarded = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the links that reach the other nodes, until cancelled."""
        await self._links.run(task_status=task_status)

    def _signature(self, body: bytes) -> str:
        return call_signing.signature(self._key, body, time.time())

    # -- the posture service --------------------------------------------------------------------------------------

    async def report_posture(self, identity_id: str, api_session_id: str, responses: Sequence[Mapping[str, Any]],
                             *, woken: bool = False, unlocked: bool = False) -> list[dict[str, Any]]:
        changed: list[dict[str, Any]] = await self._call("report_posture", identity_id, {
            "apiSessionId": api_session_id, "responses": [dict(r) for r in responses], "woken": woken,
            "unlocked": unlocked})
        return changed

    async def request_session(self, identity_id: str, api_session_id: str, service_id: str, session_type: str,
                              tags: Mapping[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = await self._call("request_session", identity_id, {
            "apiSessionId": api_session_id, "serviceId": service_id, "type": session_type, "tags": dict(tags)})
        return row

    async def state(self, identity_id: str) -> IdentityState:
        encoded: str = await self._call("state", identity_id, {})
        return decode_state(identity_id, base64.b64decode(encoded))

    def api_session_started(self, identity_id: str, api_session_id: str) -> None:
        """Nothing to send: the owner learns of the API session from its committed row (the engine of a cluster
        node does, on every node's writes)."""

    async def mfa_passed(self, identity_id: str, api_session_id: str) -> None:
        await self._call("mfa_passed", identity_id, {"apiSessionId": api_session_id})

    async def mfa_removed(self, identity_id: str) -> None:
        await self._call("mfa_removed", identity_id, {})

    # -- routing ------------------------------------------------------------------------------------------------

    async def _call(self, op: str, identity_id: str, args: dict[str, Any]) -> Any:
        deadline = trio.current_time() + self.within
        ownership = self._ownership
        again_at_once = True  # a call that never left whole goes again at once over a new link, once
        tried: set[tuple[str, int]] = set()  # the claims under which it may have run: never sent to them again
        while True:
            if ownership.owns(identity_id):
                try:
                    return await self._run_local(op, identity_id, args)
                except (Moved, ConditionFailed):
                    pass  # the shard went elsewhere under the call: route it again
            else:
                claim = ownership.claim(identity_id)
                record = None if claim is None else self._membership.live().get(claim[0])
                if claim is not None and record is not None and claim[0] != ownership.name and claim not in tried:
                    try:
                        call = _Call(op, identity_id, args, self._causality.position)
                        return await self._forward(claim[0], record.internal_address, call, deadline)
                    except _Unreachable as unreachable:
                        if unreachable.sent:  # never under that claim again: wait for the next
                            tried.add(claim)
                        elif again_at_once and ownership.claim(identity_id) == claim:
                            again_at_once = False
                            continue
                        if ownership.claim(identity_id) != claim:
                            continue  # it changed hands already (the wait may have ended for that): route it now
            if trio.current_time() >= deadline:
                raise ApiError("CLUSTER_UNAVAILABLE", nested_cause(
                    "no live node hosted the identity's actor in time", "CLUSTER_UNAVAILABLE",
                    {"applied": "unknown" if tried else "no"}))
            with trio.move_on_at(deadline):
                await ownership.changed.park()

    async def _forward(self, holder: str, address: str, call: _Call, deadline: float) -> Any:
        """Send ``call`` to ``holder``; given up (:class:`_Unreachable`) when it cannot be reached, or when the
        shard changes hands meanwhile (a paused holder never answers: its successor does)."""
        ownership = self._ownership
        reply: tuple[int, bytes] | Unanswered = Unanswered.LOST  # cut off waiting: it may have left
        with trio.move_on_at(max(deadline, trio.current_time() + 0.1)) as waiting:
            def moved() -> None:
                if ownership.holder(call.identity_id) != holder:
                    waiting.cancel()

            with ownership.changed.calling(moved):
                reply = await self._send(holder, address, call)
        if isinstance(reply, Unanswered):
            raise _Unreachable(f"no answer from the shard's holder: {reply.value}", sent=reply is Unanswered.LOST)
        status, content = reply
        self.forwarded += 1
        if status == _MOVED:
            raise _Unreachable("the node no longer hosts the identity", sent=False)
        return _result(status, content)

    async def _send(self, node: str, address: str, call: _Call) -> tuple[int, bytes] | Unanswered:
        """Send ``call``, signed, to ``node`` at ``address``: its status and body, or why it has none (not reached,
        the internal channel not running, as for a bootstrap write or while stopping; or the link broke after it
        left)."""
        reply = await self._links.call(address, msgspec.json.encode(call))
        if isinstance(reply, Unanswered):
            log.info("a forwarded call got no answer from its node",
                     extra={"node": node, "address": address, "why": reply.value})
        return reply

    # -- re-checks on the other nodes -----------------------------------------------------------------------------

    def recheck_elsewhere(self, identity_ids: frozenset[str] | None) -> Callable[[], Awaitable[None]]:
        """The engine's :class:`~controller.posture.service.RechecksElsewhere`: the barrier that has every shard the
        write just committed concerns (those of ``identity_ids``; None: every one) settled by the node holding it.

        Called as this node's engine posts its own re-checks: the shards this node holds now, and still holds once
        the engine has waited for them, are settled by then. Every other shard's holder is sent ``settle`` and
        answers with the shards it hosted throughout. A shard left unsettled (its holder stopped, died or handed it
        on) is asked again of its next holder once it has one, which re-checked what it adopted
        (``PostureEngine.adopt``); one that answered without settling is asked again after a pause; until
        :attr:`within` is spent."""
        here = self._ownership.holdings()

        async def barrier() -> None:
            identities = None if identity_ids is None else sorted(identity_ids)
            call = _Call(_SETTLE, "", {"identities": identities}, self._causality.position)
            kept = self._ownership.holdings()
            todo = set(range(SHARDS)) if identity_ids is None else {shard_of(i) for i in identity_ids}
            todo -= {shard for shard, claim in here.items() if kept.get(shard) is claim}
            with trio.move_on_after(self.within) as waited:
                await self._settle_shards(call, todo)
            if waited.cancelled_caught:
                log.warning("a write's re-checks were not all settled in time",
                            extra={"revision": call.revision, "shards": sorted(todo)})

        return barrier

    async def _settle_shards(self, call: _Call, todo: set[int]) -> None:
        """Ask each holder of a shard in ``todo`` to settle ``call`` until none is left (removed as settled). After a
        round that settled none of them, ask again once a holder changes, or after :data:`_SETTLE_RETRY` seconds:
        a holder may have answered without settling (its replica behind, its actors slow, the connection broken)."""
        ownership = self._ownership
        while todo:
            await trio.lowlevel.checkpoint()  # a round that asks nobody must still end when the bound is spent
            asked = {shard: ownership.holder_of(shard) for shard in todo}
            settled: set[int] = set()
            async with trio.open_nursery() as nursery:
                for node in {holder for holder in asked.values() if holder is not None}:
                    nursery.start_soon(self._settle_at, node, call, settled)
            progressed = bool(todo & settled)  # a holder answers every shard it hosted, asked or not
            todo -= settled
            if todo and not progressed and all(ownership.holder_of(shard) == asked[shard] for shard in todo):
                with trio.move_on_after(_SETTLE_RETRY):
                    await ownership.changed.park()

    async def _settle_at(self, node: str, call: _Call, settled: set[int]) -> None:
        """Have ``node`` settle ``call``; add the shards it hosted throughout to ``settled``."""
        if node == self._ownership.name:
            settled.update(await self._settle_hosted(call.args.get("identities")))
            return
        record = self._membership.live().get(node)
        reply = await self._send(node, record.internal_address, call) if record is not None else Unanswered.NOT_SENT
        if isinstance(reply, Unanswered):
            return
        try:
            shards = _result(*reply)
        except ApiError as error:
            log.warning("a node did not settle a write's re-checks", extra={"node": node, "error": error.code})
            return
        if isinstance(shards, list):
            settled.update(shard for shard in shards if isinstance(shard, int))

    async def _settle_hosted(self, identities: Sequence[Any] | None) -> set[int]:
        """Settle this node's identities among ``identities`` (None: every live one) once the shards it claimed
        are adopted; the shards it hosted throughout."""
        ownership = self._ownership
        await ownership.claims_adopted()
        before = ownership.holdings()
        left = await self._local.settle_hosted(None if identities is None else [str(i) for i in identities])
        after = ownership.holdings()
        lost = {shard_of(identity_id) for identity_id in left}  # the watch may not have said so yet
        return {shard for shard, claim in before.items() if after.get(shard) is claim and shard not in lost}

    async def _run_local(self, op: str, identity_id: str, args: Mapping[str, Any]) -> Any:
        local = self._local
        match op:
            case "report_posture":
                return await local.report_posture(identity_id, args["apiSessionId"], args["responses"],
                                                  woken=bool(args["woken"]), unlocked=bool(args["unlocked"]))
            case "request_session":
                return await local.request_session(identity_id, args["apiSessionId"], args["serviceId"],
                                                   args["type"], args["tags"])
            case "state":
                return base64.b64encode(encode_state(await local.state(identity_id))).decode("ascii")
            case "mfa_passed":
                return await local.mfa_passed(identity_id, args["apiSessionId"])
            case "mfa_removed":
                return await local.mfa_removed(identity_id)
        raise ApiError("INVALID_INPUT", nested_cause(f"no such forwarded operation: {op}", "INVALID_INPUT"))

    # -- serving forwarded calls ----------------------------------------------------------------------------------

    def verified(self, signature: str | None, body: bytes) -> bool:
        """Whether a forwarded request was signed by a node of this network, recently."""
        return call_signing.verified(self._key, signature, body, time.time())

    async def serve(self, signature: str | None, body: bytes) -> tuple[int, bytes]:
        """Answer a forwarded call, once this node's replica holds the revision it names: its status and JSON body
        (401 unsigned; 409 when this node does not host the identity, once the claims it made are adopted; else
        200 with the result or the error the engine gave, ``CLUSTER_UNAVAILABLE`` when the replica did not reach
        the revision in time). A ``settle`` answers the shards hosted throughout, or ``CLUSTER_UNAVAILABLE`` when
        the identities did not settle within :attr:`within` (the sender waits no longer). The general read barrier
        is not needed before it (web/internal_channel.py calls this in front of the application, whose barrier
        never runs)."""
        if not self.verified(signature, body):
            return 401, b'{"error":{"code":"UNAUTHORIZED"}}'
        try:
            call = msgspec.json.decode(body, type=_Call)
        except msgspec.DecodeError:
            return 400, b'{"error":{"code":"INVALID_INPUT"}}'
        await self._causality.wait_revision(call.revision)
        if not self._causality.reached(call.revision):  # the replica did not get there in time: nothing is decided
            return 200, b'{"error":{"code":"CLUSTER_UNAVAILABLE"}}'
        if call.op == _SETTLE:
            with trio.move_on_after(self.within):  # as long as the sender waits, not longer
                shards = await self._settle_hosted(call.args.get("identities"))
                return 200, msgspec.json.encode({"result": sorted(shards)})
            return 200, b'{"error":{"code":"CLUSTER_UNAVAILABLE"}}'
        ownership = self._ownership
        if not ownership.owns(call.identity_id):
            # It may be claimed and not adopted yet (the caller saw the claim): a "moved" would leave the caller
            # waiting for a change of hands that will not come. Nothing to wait for when no claim is under way.
            with trio.move_on_after(self.within):
                await ownership.claims_adopted()
        if not ownership.owns(call.identity_id):
            return _MOVED, b"{}"
        try:
            result = await self._run_local(call.op, call.identity_id, call.args)
        except (Moved, ConditionFailed):
            return _MOVED, b"{}"
        except ApiError as error:
            return 200, msgspec.json.encode({"error": {"code": error.code, "cause": error.cause}})
        return 200, msgspec.json.encode({"result": result})


def _result(status: int, content: bytes) -> Any:
    """What a forwarded call's answer holds: its result, or the error the other node's engine raised."""
    try:
        answer = msgspec.json.decode(content)
    except msgspec.DecodeError:
        answer = None
    if status != 200 or not isinstance(answer, dict):
        raise ApiError("UNHANDLED", nested_cause(f"the owner answered {status}"))
    refused = answer.get("error")
    if refused is not None:
        raise ApiError(refused["code"], refused.get("cause"))
    return answer.get("result")
