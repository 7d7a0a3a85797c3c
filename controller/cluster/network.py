"""One network, initialised once: which node sets it up, and the key material every node shares.

The first node to find the ``init`` key absent creates it with a create-if-absent txn, on its own lease, and
initialises the network: the PKI (:class:`NetworkPki`: the network CA's key and certificate, the one server key
every node's certificate carries, since the C SDK checks enrolment JWTs against the key of the TLS certificate it is
shown, and the enrolment-token key), then its first rows through the ordinary replicated write path (bootstrap is
idempotent). It marks the key done once that is durable. Nodes that find the key held wait until it is done; if the
holder dies first, its lease expires, etcd deletes the key and the next node takes over, reusing the PKI if it was
already stored (the PKI key is itself create-if-absent). Several nodes starting at the same instant on an empty
prefix therefore initialise it exactly once.

Every node writes the shared material into its own ``DATA_DIR/pki`` and issues itself a server certificate for its
own names from the network CA, with the shared key (:func:`install_pki`).
"""

from __future__ import annotations

import logging
import os
import secrets
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec
import trio

from controller.certificates.pki import (
    CA_CERT_NAME,
    CA_KEY_NAME,
    SERVER_KEY_NAME,
    Pki,
    ensure_pki,
    write_private_file,
)
from controller.cluster.keys import NetworkKeys
from controller.etcd import (
    Compacted,
    Compare,
    CompareOp,
    CompareTarget,
    EtcdClient,
    Put,
    Unavailable,
)

__all__ = ["TOKEN_KEY_NAME", "InitClaim", "Joined", "NetworkPki", "install_pki", "join_network"]

log = logging.getLogger("tollgate.cluster")

TOKEN_KEY_NAME = "enrollment-tokens.key"
_RETRY_PAUSE = 0.25


class NetworkPki(msgspec.Struct, frozen=True):
    """The key material every node of a network shares (PEM, and the raw enrolment-token key)."""

    ca_cert: bytes
    ca_key: bytes
    server_key: bytes
    server_key_type: str
    token_key: bytes


class _InitState(msgspec.Struct, frozen=True):
    state: str  # "working" while a node initialises, "done" after
    by: str


@dataclass(frozen=True, slots=True)
class InitClaim:
    """This node initialises the network: it holds ``init`` (created at ``revision``) on its lease."""

    revision: int

    async def finish(self, etcd: EtcdClient, keys: NetworkKeys, node: str) -> bool:
        """Mark the network initialised (the key then outlives the lease); False if another node took over
        meanwhile (this node's lease had expired), which then marks it."""
        while True:
            try:
                result = await etcd.txn([Compare(keys.init, CompareTarget.CREATE, CompareOp.EQUAL, self.revision)],
                                        [Put(keys.init, msgspec.msgpack.encode(_InitState("done", node)))])
            except Unavailable:  # guarded by the compare: trying again is harmless
                await trio.sleep(_RETRY_PAUSE)
                continue
            return result.succeeded


@dataclass(frozen=True, slots=True)
class Joined:
    """The network's PKI, this node's claim when it is the one initialising it, and what identifies the network
    (``identity``: etcd's cluster id, the prefix and the revision its PKI was stored at), so that a replica made for
    another network (or an etcd since wiped) is never taken for this one's."""

    pki: NetworkPki
    claim: InitClaim | None
    identity: str


def _state(data: bytes) -> _InitState | None:
    try:
        return msgspec.msgpack.decode(data, type=_InitState)
    except msgspec.DecodeError:
        return None


async def join_network(etcd: EtcdClient, keys: NetworkKeys, lease_id: Callable[[], int], node: str, *,
                       server_key_type: str) -> Joined:
    """Initialise the network if nobody has, else wait until it is and join it. ``lease_id()`` is the lease this
    node holds now; ``node`` names this process (unique to it); ``server_key_type`` is the kind of server key a new
    network gets."""
    while True:
        try:
            found = await etcd.get(keys.init)
            state = _state(found.value) if found is not None else None
            if state is not None and state.state == "done":
                return await _joined(etcd, keys, server_key_type, None)
            if found is not None and state is not None and state.by == node:  # a claim whose answer was lost
                return await _joined(etcd, keys, server_key_type, InitClaim(found.create_revision))
            if found is None:
                working = msgspec.msgpack.encode(_InitState("working", node))
                result = await etcd.txn([Compare.absent(keys.init)], [Put(keys.init, working, lease=lease_id())])
                if result.succeeded:
                    log.info("initialising the network", extra={"node": node})
                    return await _joined(etcd, keys, server_key_type, InitClaim(result.header.revision))
                continue
            log.info("waiting for another node to initialise the network", extra={"by": state.by if state else ""})
            async with etcd.watch(keys.init, start_revision=found.mod_revision + 1) as watch:
                async for _update in watch:
                    break  # changed (done) or deleted (its holder died): look again
        except (Unavailable, Compacted) as error:  # a lost create is settled by the next look: ours or not
            log.debug("etcd was unavailable while joining", extra={"error": str(error)})
            await trio.sleep(_RETRY_PAUSE)


async def _joined(etcd: EtcdClient, keys: NetworkKeys, server_key_type: str, claim: InitClaim | None) -> Joined:
    pki, identity = await _network_pki(etcd, keys, server_key_type)
    return Joined(pki, claim, identity)


def _new_pki(server_key_type: str) -> NetworkPki:
    """Fresh key material: a CA, a server key of ``server_key_type`` and an enrolment-token key."""
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        ensure_pki(directory, server_key_type=server_key_type)
        return NetworkPki((directory / CA_CERT_NAME).read_bytes(), (directory / CA_KEY_NAME).read_bytes(),
                          (directory / SERVER_KEY_NAME).read_bytes(), server_key_type, secrets.token_bytes(32))


async def _network_pki(etcd: EtcdClient, keys: NetworkKeys, server_key_type: str) -> tuple[NetworkPki, str]:
    """The network's PKI (made and stored, create-if-absent, if the network has none yet) and the network's
    identity (:attr:`Joined.identity`)."""
    made: NetworkPki | None = None
    while True:
        found = await etcd.range(keys.pki)
        if found.kvs:
            kv = found.kvs[0]
            identity = f"{found.header.cluster_id:x}:{keys.prefix.decode()}:{kv.create_revision}"
            return msgspec.msgpack.decode(kv.value, type=NetworkPki), identity
        if made is None:
            made = await trio.to_thread.run_sync(_new_pki, server_key_type)
        try:  # guarded by the compare: trying again, or losing to another node, is harmless
            await etcd.txn([Compare.absent(keys.pki)], [Put(keys.pki, msgspec.msgpack.encode(made))])
        except Unavailable:
            await trio.sleep(_RETRY_PAUSE)


def install_pki(material: NetworkPki, pki_dir: Path, sans: Sequence[str]) -> Pki:
    """Write the network's material into ``pki_dir`` and issue this node's server certificate (for ``sans`` and
    the default names) from the network CA, with the shared server key; what was there before is replaced."""
    pki_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(pki_dir, 0o700)
    ca_path = pki_dir / CA_CERT_NAME
    if ca_path.exists() and ca_path.read_bytes() != material.ca_cert:
        log.warning("replacing this data directory's PKI with the network's", extra={"path": str(pki_dir)})
    for name, data in ((CA_KEY_NAME, material.ca_key), (SERVER_KEY_NAME, material.server_key),
                       (TOKEN_KEY_NAME, material.token_key), (CA_CERT_NAME, material.ca_cert)):
        path = pki_dir / name
        if not path.exists() or path.read_bytes() != data:
            write_private_file(path, data)
    os.chmod(ca_path, 0o644)
    return ensure_pki(pki_dir, sans, server_key_type=material.server_key_type)
