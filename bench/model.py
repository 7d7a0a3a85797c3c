"""Benchmark models: OpenZiti's medium and large model sizes, loaded in bulk into a controller's data directory.

Every row goes through the controller's own validation and single write path (``Domain.validated_create`` and
``write_path.create_row``), so the indexes, role lists and references are exactly what requests would have
produced; only the batching differs: thousands of rows per transaction instead of one request each.

The shape, the same for every size so that sizes compare: identities, services and service policies are split into
role groups. Policy ``p`` selects identity group ``p % G`` and service group ``p // 5 % G`` (``G`` = policies / 5), so
every identity is selected by five policies, three Dial and two Bind (``p // G`` even or odd). Every
router is selected for every identity and service (``#all`` router policies, as most networks have). With
``posture`` on, one posture check of each of the six types exists and every policy requires all of them; the
driven identities then pass them all (MFA is seeded as passed, the rest is reported by the client).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from controller.authentication.api_sessions import TOKEN_DIGEST, token_digest
from controller.clock import format_time
from controller.data.write_path import create_row
from controller.model.spec import Resource, WriteContext
from controller.posture.engine import STATE_KIND
from controller.posture.records import MfaState
from controller.posture.state import IdentityState, SessionPosture, encode_state
from controller.runtime.composition import Controller

__all__ = ["HTTP", "LARGE", "MEDIUM", "Loaded", "ModelSize", "load_model", "posture_responses"]

PROCESS_PATH = "C:\\Program Files\\Corp\\agent.exe"
PROCESS_HASH = "ab" * 32
SIGNER = "cd" * 20
MAC = "aa:bb:cc:dd:ee:ff"


@dataclass(frozen=True, slots=True)
class ModelSize:
    """How many of each kind a model holds; ``clients`` is how many identities get an API session to drive."""

    name: str
    services: int
    identities: int
    edge_routers: int
    service_policies: int
    posture: bool = True
    clients: int = 1_000
    mfa_timeout_seconds: int = -1  # of the model's MFA check (-1: none, so no deadline)


MEDIUM = ModelSize("medium", services=100, identities=5_000, edge_routers=100, service_policies=50)
LARGE = ModelSize("large", services=2_000, identities=100_000, edge_routers=500, service_policies=250)
# The http scenario's model: 10k identities to filter, a few of everything else.
HTTP = ModelSize("http", services=20, identities=10_000, edge_routers=5, service_policies=10, clients=0)


def scaled(size: ModelSize, factor: float) -> ModelSize:
    """A smaller model of the same shape (for quick smoke runs)."""
    return replace(size, name=f"{size.name}/{factor:g}", services=max(10, int(size.services * factor)),
                   identities=max(10, int(size.identities * factor)),
                   edge_routers=max(2, int(size.edge_routers * factor)),
                   service_policies=max(10, int(size.service_policies * factor) // 10 * 10),
                   clients=min(size.clients, max(5, int(size.clients * factor))))


@dataclass(slots=True)
class Loaded:
    """What a benchmark client needs to drive a loaded model (JSON-serialisable)."""

    size: str
    identity_ids: list[str] = field(default_factory=list)
    posture_check_ids: dict[str, str] = field(default_factory=dict)
    # One driven client per entry: its API session token and the services it may dial.
    clients: list[dict[str, Any]] = field(default_factory=list)


def _groups(size: ModelSize) -> int:
    return max(1, size.service_policies // 5)


async def _bulk(controller: Controller, writes: Sequence[Callable[[WriteContext], dict[str, Any]]],
          chunk: int = 5_000) -> list[dict[str, Any]]:
    """Run the writes in transactions of ``chunk`` rows; returns the stored rows."""
    rows: list[dict[str, Any]] = []
    registry, now, env = controller.registry, controller.clock.now(), controller.domain.env
    for start in range(0, len(writes), chunk):
        part = writes[start:start + chunk]

        def mutation(txn: Any, part: Sequence[Callable[[WriteContext], dict[str, Any]]] = part) -> list[Any]:
            ctx = WriteContext(txn, registry, now, env=env)
            return [write(ctx) for write in part]

        rows.extend(await controller.writer.submit(mutation))
    return rows


async def _create_all(controller: Controller, kind: str, bodies: Iterable[dict[str, Any]]) -> list[str]:
    writes = [controller.domain.validated_create(kind, body) for body in bodies]
    return [str(row["id"]) for row in await _bulk(controller, writes)]


def _posture_checks(mfa_timeout_seconds: int) -> list[dict[str, Any]]:
    process = {"osType": "Windows", "path": PROCESS_PATH, "hashes": [PROCESS_HASH], "signerFingerprint": SIGNER}
    return [
        {"name": "os", "typeId": "OS", "operatingSystems": [{"type": "Windows", "versions": [">=10.0.0"]}]},
        {"name": "mac", "typeId": "MAC", "macAddresses": [MAC]},
        {"name": "domain", "typeId": "DOMAIN", "domains": ["corp"]},
        {"name": "process", "typeId": "PROCESS", "process": process},
        {"name": "process-multi", "typeId": "PROCESS_MULTI", "semantic": "AllOf",
         "processes": [{"osType": "Windows", "path": PROCESS_PATH, "hashes": [PROCESS_HASH],
                        "signerFingerprints": [SIGNER]}]},
        {"name": "mfa", "typeId": "MFA", "timeoutSeconds": mfa_timeout_seconds, "promptOnWake": False,
         "promptOnUnlock": False},
    ]


def posture_responses(check_ids: dict[str, str]) -> list[dict[str, Any]]:
    """The bulk posture response with which a driven client passes every check of the model (MFA aside)."""
    process = {"typeId": "PROCESS", "path": PROCESS_PATH, "isRunning": True, "hash": PROCESS_HASH,
               "signerFingerprints": [SIGNER]}
    return [
        {"id": check_ids["OS"], "typeId": "OS", "type": "Windows", "version": "10.0.19045", "build": "19045"},
        {"id": check_ids["MAC"], "typeId": "MAC", "macAddresses": [MAC]},
        {"id": check_ids["DOMAIN"], "typeId": "DOMAIN", "domain": "corp"},
        {"id": check_ids["PROCESS"], **process},
        {"id": check_ids["PROCESS_MULTI"], **process},
    ]


async def load_model(controller: Controller, size: ModelSize) -> Loaded:
    """Create the model's rows (call before the controller serves; no actor exists yet)."""
    groups = _groups(size)
    loaded = Loaded(size.name)
    await _create_all(controller, "edge-routers", ({"name": f"er-{i}", "roleAttributes": ["routers"]}
                                             for i in range(size.edge_routers)))
    await _create_all(controller, "edge-router-policies", [{"name": "all-routers", "semantic": "AnyOf",
                                                      "identityRoles": ["#all"], "edgeRouterRoles": ["#all"]}])
    await _create_all(controller, "service-edge-router-policies", [{"name": "all-services", "semantic": "AnyOf",
                                                              "serviceRoles": ["#all"],
                                                              "edgeRouterRoles": ["#all"]}])
    services = await _create_all(controller, "services", ({"name": f"svc-{j}", "encryptionRequired": True,
                                                     "roleAttributes": [f"sg{j % groups}"]}
                                                    for j in range(size.services)))
    if size.posture:
        checks = _posture_checks(size.mfa_timeout_seconds)
        ids = await _create_all(controller, "posture-checks", ({**c, "roleAttributes": ["posture"]} for c in checks))
        loaded.posture_check_ids = {str(c["typeId"]): i for c, i in zip(checks, ids, strict=True)}
    await _create_all(controller, "service-policies", (
        {"name": f"sp-{p}", "type": "Dial" if p // groups % 2 == 0 else "Bind", "semantic": "AnyOf",
         "identityRoles": [f"#ig{p % groups}"], "serviceRoles": [f"#sg{p // 5 % groups}"],
         "postureCheckRoles": ["#posture"] if size.posture else []}
        for p in range(size.service_policies)))
    loaded.identity_ids = await _create_all(controller, "identities", (
        {"name": f"user-{i:06d}", "type": "User", "isAdmin": False, "roleAttributes": [f"ig{i % groups}", "users"]}
        for i in range(size.identities)))
    await _add_clients(controller, size, loaded, services, groups)
    return loaded


def _create_session(ctx: WriteContext, *, sessions: Resource, body: dict[str, Any]) -> dict[str, Any]:
    return create_row(ctx, sessions, body, None)


async def _add_clients(controller: Controller, size: ModelSize, loaded: Loaded, services: list[str],
                       groups: int) -> None:
    """Give ``size.clients`` identities, spread over the groups, an API session that has passed MFA."""
    sessions = controller.registry["api-sessions"]
    now = controller.clock.now()
    # Services by group, and the Dial groups of each identity group (Dial policies are the even ones).
    by_group: dict[int, list[str]] = {}
    for j, service_id in enumerate(services):
        by_group.setdefault(j % groups, []).append(service_id)
    dial_groups: dict[int, set[int]] = {}
    for p in range(size.service_policies):
        if p // groups % 2 == 0:
            dial_groups.setdefault(p % groups, set()).add(p // 5 % groups)
    step = max(1, size.identities // max(1, size.clients))
    writes: list[Callable[[WriteContext], dict[str, Any]]] = []
    for n in range(size.clients):
        index = n * step % size.identities
        identity_id = loaded.identity_ids[index]
        token = str(uuid.uuid4())
        body = {TOKEN_DIGEST: token_digest(token), "identityId": identity_id, "authenticatorId": "bench",
                "ipAddress": "127.0.0.1",
                "lastActivityAt": format_time(now), "isMfaRequired": False, "isMfaComplete": False}
        writes.append(functools.partial(_create_session, sessions=sessions, body=body))
        dial = sorted(s for g in dial_groups.get(index % groups, set()) for s in by_group.get(g, []))
        loaded.clients.append({"identityId": identity_id, "token": token, "services": dial})
    rows = await _bulk(controller, writes)
    # MFA passed at login for every driven API session (the other checks are reported by the client over HTTP).
    passed: dict[str, dict[str, SessionPosture]] = {}  # an identity may drive several API sessions
    for client, row in zip(loaded.clients, rows, strict=True):
        client["apiSessionId"] = row["id"]
        passed.setdefault(client["identityId"], {})[row["id"]] = SessionPosture(MfaState(passed_mfa_at=now))
    states = [(identity_id, encode_state(IdentityState(identity_id, sessions=sessions)))
              for identity_id, sessions in passed.items()]

    def put_states(ctx: WriteContext) -> dict[str, Any]:
        for identity_id, encoded in states:
            ctx.txn.put_raw(STATE_KIND, identity_id, encoded)
        return {}

    await _bulk(controller, [put_states])
