"""``GET /metrics`` on the listener ``--metrics-address`` opens, and nowhere else.

``serve_controller`` runs on real loopback sockets (plain HTTP) on Trio's virtual clock: while the sockets talk, the
clock's autojump is off, so virtual time stands still and no server timeout fires in a jump; to reach an MFA
deadline the test turns it back on and sleeps. A known workload goes through the API listener with httpx, and the
exposition scraped from the metrics listener must show exactly what it did: requests by route template, refused
logins by method, revocations by cause, the deadline's lateness, the actors, deadlines and API sessions held at
that moment, and one observation per group commit.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families
from trio.testing import MockClock

from controller.runtime.composition import Controller
from tests.support import (
    ADMIN_PASSWORD,
    ADMIN_USERNAME,
    CLIENT,
    MGMT,
    make_settings,
    seed_pki,
    totp,
    virtual_time_stands_still,
)
from tests.support import serving as serving_controller

MFA_TIMEOUT = 60
PASSWORD = {"method": "password"}
MAC_OK = {"id": "c", "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF"]}
MAC_BAD = {"id": "c", "typeId": "MAC", "macAddresses": ["11:22:33:44:55:66"]}


@dataclass
class Served:
    """A controller ``serve_controller`` runs, its API base URL and its metrics URL (None without a listener)."""

    controller: Controller
    url: str
    metrics_url: str | None

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port


@asynccontextmanager
async def serving(data_dir: Path, **overrides: Any) -> AsyncIterator[Served]:
    """Run ``serve_controller`` on a free loopback port (plain HTTP) until the block ends, then shut it down."""
    seed_pki(data_dir)
    async with serving_controller(make_settings(data_dir, host="127.0.0.1", port=0, **overrides)) as (controller, urls):
        metrics = controller.metrics
        yield Served(controller, urls[0], metrics.url if metrics is not None else None)


def listening_ports() -> set[int]:
    """The TCP ports this process listens on (Linux: its socket descriptors matched against /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(served: Served) -> Samples:
    """Every sample of ``GET /metrics``, by name and labels."""
    assert served.metrics_url is not None
    async with httpx.AsyncClient(timeout=10) as client:
        reply = await client.get(served.metrics_url)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(reply.text) for sample in family.samples}


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def revocations(samples: Samples) -> dict[str, float]:
    """Sessions revoked by cause; every cause is exposed, counted or not."""
    return {dict(labels)["cause"]: value for (name, labels), value in samples.items()
            if name == "tollgate_session_revocations_total"}


class Client:
    """httpx on one API of the served controller, with the ``zt-session`` of its login."""

    def __init__(self, http: httpx.AsyncClient, base: str, token: str | None = None) -> None:
        self.http, self.base, self.token = http, base, token

    async def call(self, verb: str, path: str, body: Any = None, *, expect: int | None = None,
                   query: dict[str, str] | None = None) -> httpx.Response:
        headers = {"zt-session": self.token} if self.token else {}
        reply = await self.http.request(verb, self.base + path, json=body, params=query, headers=headers)
        if expect is not None:
            assert reply.status_code == expect, reply.text
        return reply

    async def create(self, path: str, body: dict[str, Any]) -> str:
        return str((await self.call("POST", path, body, expect=201)).json()["data"]["id"])

    async def login(self, username: str, password: str) -> Client:
        reply = await self.call("POST", "/authenticate", {"username": username, "password": password}, expect=200,
                                query=PASSWORD)
        return Client(self.http, self.base, reply.json()["data"]["token"])


async def workload(served: Served, http: httpx.AsyncClient) -> None:
    """Three reads of one route, two wrong passwords and a wrong MFA code, an admin's and a user's API session, and
    three Dial sessions of the user: one revoked by a posture report, one by a policy's deletion, one (passed MFA)
    left to its MFA deadline."""
    anon = Client(http, served.url + MGMT)
    for _ in range(2):
        await anon.call("POST", "/authenticate", {"username": ADMIN_USERNAME, "password": "wrong-password"},
                        expect=401, query=PASSWORD)
    admin = await anon.login(ADMIN_USERNAME, ADMIN_PASSWORD)
    ids = {"router": await admin.create("/edge-routers", {"name": "er1", "roleAttributes": ["er"]})}
    await admin.create("/edge-router-policies", {"name": "erp", "semantic": "AnyOf", "identityRoles": ["#all"],
                                                 "edgeRouterRoles": ["#all"]})
    await admin.create("/service-edge-router-policies", {"name": "serp", "semantic": "AnyOf",
                                                         "serviceRoles": ["#all"], "edgeRouterRoles": ["#all"]})
    await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                           "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    await admin.create("/posture-checks", {"name": "mfa", "typeId": "MFA", "roleAttributes": ["mfa"],
                                           "timeoutSeconds": MFA_TIMEOUT})
    for name, checks in (("mac", ["#mac"]), ("mfa", ["#mfa"]), ("open", [])):
        ids[name] = await admin.create("/services", {"name": name, "encryptionRequired": True,
                                                     "roleAttributes": [name]})
        ids[f"policy-{name}"] = await admin.create("/service-policies", {
            "name": f"p-{name}", "type": "Dial", "semantic": "AllOf", "identityRoles": ["#u"],
            "serviceRoles": [f"#{name}"], "postureCheckRoles": checks})
    identities = [await admin.create("/identities", {"name": name, "type": "User", "isAdmin": False,
                                                      "roleAttributes": ["u"]}) for name in ("user1", "u2", "u3")]
    await admin.create("/authenticators", {"identityId": identities[0], "method": "updb", "username": "user1",
                                           "password": "user-password"})
    for identity_id in identities:  # one route, three paths
        await admin.call("GET", f"/identities/{identity_id}", expect=200)

    user = await Client(http, served.url + CLIENT).login("user1", "user-password")
    await user.call("POST", "/current-identity/mfa", expect=201)
    detail = (await user.call("GET", "/current-identity/mfa", expect=200)).json()["data"]
    secret = parse_qs(urlsplit(detail["provisioningUrl"]).query)["secret"][0]
    await user.call("POST", "/current-identity/mfa/verify", {"code": totp(served.controller, secret)}, expect=200)
    await user.call("POST", "/authenticate/mfa", {"code": "not-a-code"}, expect=400)
    await user.call("POST", "/posture-response", MAC_OK, expect=201)
    for name in ("mac", "mfa", "open"):
        await user.call("POST", "/sessions", {"serviceId": ids[name], "type": "Dial"}, expect=201)
    await user.call("POST", "/posture-response", MAC_BAD, expect=201)  # revokes the MAC service's session
    await admin.call("DELETE", f"/service-policies/{ids['policy-open']}", expect=200)  # revokes the open one's
    await anon.call("GET", "/metrics", expect=404)  # not on the API listener


async def test_metrics_show_exactly_what_the_controller_did(tmp_path: Path, autojump_clock: MockClock) -> None:
    async with serving(tmp_path, metrics_address="127.0.0.1:0") as served:
        assert served.metrics_url is not None
        metrics_port = urlsplit(served.metrics_url).port
        assert served.metrics_url == f"http://127.0.0.1:{metrics_port}/metrics"
        writer = served.controller.writer
        with virtual_time_stands_still(autojump_clock):
            assert listening_ports() == {served.port, metrics_port}
            async with httpx.AsyncClient(timeout=10) as http:
                await workload(served, http)
            samples = await scrape(served)

        requests = "tollgate_http_requests_total"
        assert sample(samples, requests, route=f"{MGMT}/identities/<id>", method="GET", status="200") == 3
        assert sample(samples, "tollgate_http_request_duration_seconds_count", route=f"{MGMT}/identities/<id>",
                      method="GET") == 3
        assert sample(samples, requests, route=f"{MGMT}/authenticate", method="POST", status="401") == 2
        assert sample(samples, requests, route=f"{MGMT}/authenticate", method="POST", status="200") == 1
        assert sample(samples, requests, route="unmatched", method="GET", status="404") == 1
        assert not any(name == requests and "/metrics" in dict(labels)["route"] for name, labels in samples)
        failures = {dict(labels)["method"] + ":" + dict(labels)["code"]: value for (name, labels), value
                    in samples.items() if name == "tollgate_login_failures_total"}
        assert failures == {"password:INVALID_AUTH": 2, "mfa:MFA_INVALID_TOKEN": 1}
        assert revocations(samples) == {"policy": 1, "posture": 1, "mfa_timeout": 0}
        assert sample(samples, "tollgate_session_decisions_total") == 3
        assert sample(samples, "tollgate_api_sessions") == 2
        # The user's actor waits for its MFA deadline; the admin's has passivated.
        assert sample(samples, "tollgate_identity_actors_live") == 1
        assert sample(samples, "tollgate_identity_actors_parked") == 1
        assert sample(samples, "tollgate_scheduler_pending_deadlines") == 1
        assert sample(samples, "tollgate_scheduler_fired_deadlines_total") == 0
        assert sample(samples, "tollgate_deadline_decision_lateness_seconds_count") == 0
        assert sample(samples, "tollgate_writer_commit_duration_seconds_count") == writer.commits > 0
        assert sample(samples, "tollgate_writer_batch_writes_count") == writer.commits
        assert sample(samples, "tollgate_writer_batch_writes_sum") == writer.mutations

        await trio.sleep(MFA_TIMEOUT + 1)  # autojump: the deadline fires on the dot
        await trio.testing.wait_all_tasks_blocked()
        with virtual_time_stands_still(autojump_clock):
            samples = await scrape(served)
        assert revocations(samples) == {"policy": 1, "posture": 1, "mfa_timeout": 1}
        assert sample(samples, "tollgate_scheduler_fired_deadlines_total") == 1
        assert sample(samples, "tollgate_scheduler_pending_deadlines") == 0
        assert sample(samples, "tollgate_identity_actors_live") == 0
        assert sample(samples, "tollgate_identity_actors_parked") == 0
        for lateness in ("decision", "durable"):
            name = f"tollgate_deadline_{lateness}_lateness_seconds"
            assert sample(samples, f"{name}_count") == 1
            assert sample(samples, f"{name}_bucket", le="0.0001") == sample(samples, f"{name}_bucket", le="+Inf") == 1
            assert abs(sample(samples, f"{name}_sum")) < 1e-6  # on time, up to the clock's float rounding


async def test_the_metrics_listener_serves_only_metrics(tmp_path: Path) -> None:
    async with serving(tmp_path, metrics_address="127.0.0.1:0") as served, httpx.AsyncClient(timeout=10) as http:
        assert served.metrics_url is not None
        base = served.metrics_url.removesuffix("/metrics")
        assert (await http.get(base + "/")).status_code == 404
        assert (await http.get(base + MGMT + "/version")).status_code == 404
        refused = await http.post(served.metrics_url)
        assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"
        head = await http.head(served.metrics_url)
        assert head.status_code == 200 and head.content == b""
        assert (await http.get(served.url + "/metrics")).status_code == 404


async def test_without_a_metrics_address_no_listener_is_opened(tmp_path: Path) -> None:
    async with serving(tmp_path) as served:
        assert served.metrics_url is None and served.controller.metrics is None
        assert listening_ports() == {served.port}
