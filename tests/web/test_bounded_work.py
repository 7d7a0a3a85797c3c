"""What one request may cost: a bulk posture report is one decision and one write, what an endpoint reports is
bounded in size and in what is kept, and ``limit=-1`` answers a bounded number of rows."""

from __future__ import annotations

import pytest

from controller.data import listing
from controller.posture.records import MAX_PROCESSES
from controller.runtime.composition import Controller
from tests.support import Api
from tests.web.test_client_posture import MAC_OK, dial_policy, network, user
from web.routes.client_routes import MAX_BULK_RESPONSES, MAX_LIST_ITEMS, MAX_TEXT


def process(index: int) -> dict[str, object]:
    return {"id": f"check-{index}", "typeId": "PROCESS", "path": f"/opt/app-{index}", "isRunning": True,
            "hash": "ab" * 32, "signerFingerprints": ["cd" * 20]}


async def test_a_bulk_report_is_one_durable_write(admin: Api, controller: Controller) -> None:
    ids = await network(admin)
    check = await admin.create("/posture-checks", {"name": "mac", "typeId": "MAC", "roleAttributes": ["mac"],
                                                   "macAddresses": ["aa-bb-cc-dd-ee-ff"]})
    await dial_policy(admin, "p", ["#mac"])
    identity_id, client = await user(admin)
    await client.get("/current-api-session")  # any write a first request causes happens before counting
    before = controller.writer.mutations
    reports = [process(i) for i in range(40)] + [{**MAC_OK, "id": check},
                                                 {"id": "e", "typeId": "ENDPOINT_STATE", "woken": True}]
    reply = await client.post("/posture-response-bulk", reports)
    assert reply.status == 201, reply.body
    assert controller.writer.mutations - before == 1
    data = (await admin.get(f"/identities/{identity_id}/posture-data")).data
    assert data["mac"]["addresses"] == ["aa-bb-cc-dd-ee-ff"] and len(data["processes"]) == 40
    assert (await client.post("/sessions", {"serviceId": ids["service"]})).status == 201


async def test_kept_process_reports_are_bounded(admin: Api) -> None:
    await network(admin)
    identity_id, client = await user(admin)
    extra = 10
    for start in range(0, MAX_PROCESSES + extra, 25):
        batch = [process(i) for i in range(start, min(start + 25, MAX_PROCESSES + extra))]
        assert (await client.post("/posture-response-bulk", batch)).status == 201
    kept = (await admin.get(f"/identities/{identity_id}/posture-data")).data["processes"]
    # The latest reports are kept, the oldest dropped.
    assert sorted(p["postureCheckId"] for p in kept) == sorted(f"check-{i}" for i in range(extra,
                                                                                            MAX_PROCESSES + extra))


@pytest.mark.parametrize(("body", "field"), [
    ([{"id": "c", "typeId": "DOMAIN", "domain": "corp"}] * (MAX_BULK_RESPONSES + 1), "postureResponse"),
    ([{"id": "c", "typeId": "DOMAIN", "domain": "x" * (MAX_TEXT + 1)}], "domain"),
    ([{"id": "c", "typeId": "MAC", "macAddresses": ["aa:bb:cc:dd:ee:ff"] * (MAX_LIST_ITEMS + 1)}], "macAddresses"),
    ([{"id": "c", "typeId": "MAC", "macAddresses": [7]}], "macAddresses"),
    ([{**process(1), "path": "/" * (MAX_TEXT + 1)}], "path"),
], ids=["too-many-items", "long-string", "long-list", "non-string-item", "long-path"])
async def test_oversized_reports_are_refused_and_change_nothing(admin: Api, body: list[dict[str, object]],
                                                                field: str) -> None:
    await network(admin)
    identity_id, client = await user(admin)
    before = (await admin.get(f"/identities/{identity_id}/posture-data")).data
    reply = await client.post("/posture-response-bulk", body)
    assert reply.status == 400 and reply.error["code"] == "COULD_NOT_VALIDATE", reply.body
    assert reply.error["cause"]["field"] == field
    assert (await admin.get(f"/identities/{identity_id}/posture-data")).data == before


async def test_limit_minus_one_answers_a_bounded_number_of_rows(admin: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "MAX_UNLIMITED", 3)
    for name in ("a", "b", "c"):
        await admin.create("/services", {"name": name, "encryptionRequired": True})
    everything = await admin.get("/services", query={"limit": "-1"})
    assert everything.status == 200 and len(everything.data) == 3
    await admin.create("/services", {"name": "d", "encryptionRequired": True})
    for query in ({"limit": "-1"}, {"limit": "-1", "filter": 'name != "zzz"'}, {"limit": "-1", "sort": "name"}):
        refused = await admin.get("/services", query=query)
        assert refused.status == 400 and refused.error["code"] == "INVALID_PAGINATION", query
    # From an offset that leaves at most the cap, and paged, it answers.
    assert len((await admin.get("/services", query={"limit": "-1", "offset": "1"})).data) == 3
    assert len((await admin.get("/services", query={"limit": "500"})).data) == 4
