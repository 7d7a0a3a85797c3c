"""Per-identity service config overrides (``/identities/{id}/service-configs``) over HTTP: listed, shown in the
identity's Client API services in place of the service's own config of the same type, replaced per config type,
removed, refused without a trace, and gone with the config or service they name."""

from __future__ import annotations

from typing import Any

import trio

from controller.runtime.composition import Controller
from tests.conformance import oracle
from tests.support import Api, make_user
from tests.web.test_client_posture import dial_policy, network
from tests.web.test_view_conformance import shape_problems

INTERCEPT = "intercept.v1"
HOST = "host.v1"


def intercept(address: str) -> dict[str, Any]:
    return {"protocols": ["tcp"], "addresses": [address], "portRanges": [{"low": 80, "high": 80}]}


def host(address: str) -> dict[str, Any]:
    return {"protocol": "tcp", "address": address, "port": 80}


async def setup(admin: Api) -> dict[str, str]:
    """A service carrying an intercept.v1 config, two other configs of that type, one host.v1 config, and a user
    who may dial the service, logged in on the Client API asking for every config type."""
    ids = await network(admin)
    types = {t["name"]: t["id"] for t in (await admin.get("/config-types", query={"limit": "-1"})).data}
    for name, type_name, data in (("own", INTERCEPT, intercept("own.ziti")), ("alt", INTERCEPT, intercept("alt.ziti")),
                                  ("alt2", INTERCEPT, intercept("alt2.ziti")), ("host", HOST, host("10.0.0.1"))):
        ids[name] = await admin.create("/configs", {"name": name, "configTypeId": types[type_name], "data": data})
    assert (await admin.patch(f"/services/{ids['service']}", {"configs": [ids["own"]]})).status == 200
    await dial_policy(admin, "dial", [])
    ids["identity"], _ = await make_user(admin, "user1", roleAttributes=["u"])
    login = await admin.with_token(None).post("/authenticate", {"username": "user1", "password": "user-password",
                                                                "configTypes": ["all"]}, query={"method": "password"})
    assert login.status == 200, login.body
    ids["token"] = login.data["token"]
    return ids


def path(ids: dict[str, str]) -> str:
    return f"/identities/{ids['identity']}/service-configs"


async def overrides(admin: Api, ids: dict[str, str]) -> list[tuple[str, str]]:
    reply = await admin.get(path(ids))
    assert reply.status == 200, reply.body
    return [(item["serviceId"], item["configId"]) for item in reply.data]


async def client_view(admin: Api, ids: dict[str, str], **query: str) -> dict[str, Any]:
    client = admin.with_token(ids["token"]).as_client()
    reply = await client.get(f"/services/{ids['service']}", query=query or None)
    assert reply.status == 200, reply.body
    listed = await client.get("/services", query=query or None)
    assert [s["config"] for s in listed.data] == [reply.data["config"]]
    data: dict[str, Any] = reply.data
    return data


async def test_override_replaces_the_services_config_for_that_identity_only(admin: Api) -> None:
    ids = await setup(admin)
    assert await overrides(admin, ids) == []
    view = await client_view(admin, ids)
    assert (view["configs"], view["config"]) == ([ids["own"]], {INTERCEPT: intercept("own.ziti")})

    reply = await admin.post(path(ids), [{"serviceId": ids["service"], "configId": ids["alt"]}])
    assert (reply.status, reply.body["data"]) == (200, {})
    listed = await admin.get(path(ids))
    assert listed.data == [{
        "serviceId": ids["service"], "configId": ids["alt"],
        "service": {"id": ids["service"], "name": "svc", "entity": "services",
                    "_links": {"self": {"href": f"./services/{ids['service']}"}}},
        "config": {"id": ids["alt"], "name": "alt", "entity": "configs",
                   "_links": {"self": {"href": f"./configs/{ids['alt']}"}}}}]
    assert listed.body["meta"]["pagination"] == {"limit": 1, "offset": 0, "totalCount": 1}
    reference = oracle.require("management")
    assert shape_problems(reference, {"$ref": "#/definitions/listServiceConfigsEnvelope"}, listed.body, "") == []

    view = await client_view(admin, ids)
    assert (view["configs"], view["config"]) == ([ids["alt"]], {INTERCEPT: intercept("alt.ziti")})
    # An override of a type the service does not carry is added to what the identity sees.
    assert (await admin.post(path(ids), [{"serviceId": ids["service"], "configId": ids["host"]}])).status == 200
    view = await client_view(admin, ids)
    assert view["configs"] == [ids["alt"], ids["host"]]
    assert view["config"] == {INTERCEPT: intercept("alt.ziti"), HOST: host("10.0.0.1")}
    # Only the types asked for carry data; the service itself and other identities are untouched.
    view = await client_view(admin, ids, configTypes=HOST)
    assert view["config"] == {HOST: host("10.0.0.1")}
    assert (await admin.get(f"/services/{ids['service']}")).data["configs"] == [ids["own"]]
    _, other = await make_user(admin, "user2", roleAttributes=["u"])
    other_view = await other.as_client().get(f"/services/{ids['service']}", query={"configTypes": "all"})
    assert other_view.data["config"] == {INTERCEPT: intercept("own.ziti")}


async def test_one_override_per_service_and_config_type(admin: Api) -> None:
    ids = await setup(admin)
    pair = {"serviceId": ids["service"], "configId": ids["alt"]}
    assert (await admin.post(path(ids), [pair, {"serviceId": ids["service"], "configId": ids["host"]}])).status == 200
    assert (await admin.post(path(ids), [pair])).status == 200  # already there: nothing changes
    assert (await admin.post(path(ids), [{"serviceId": ids["service"], "configId": ids["alt2"]}])).status == 200
    assert sorted(await overrides(admin, ids)) == sorted([(ids["service"], ids["alt2"]),
                                                          (ids["service"], ids["host"])])
    assert (await client_view(admin, ids))["config"][INTERCEPT] == intercept("alt2.ziti")


async def test_refusals_change_nothing(admin: Api) -> None:
    ids = await setup(admin)
    assert (await admin.post(path(ids), [{"serviceId": ids["service"], "configId": ids["alt"]}])).status == 200
    before = await overrides(admin, ids)
    good = {"serviceId": ids["service"], "configId": ids["host"]}

    reply = await admin.post("/identities/no-such-identity/service-configs", [good])
    assert (reply.status, reply.error["code"]) == (404, "NOT_FOUND")
    assert (await admin.get("/identities/no-such-identity/service-configs")).status == 404
    assert (await admin.delete("/identities/no-such-identity/service-configs")).status == 404
    # The first pairs are valid: the failure of a later one undoes them.
    reply = await admin.post(path(ids), [good, {"serviceId": "no-such-service", "configId": ids["host"]}])
    assert (reply.status, reply.error["cause"]["message"]) == (404, "service with id no-such-service not found")
    reply = await admin.post(path(ids), [good, {"serviceId": ids["service"], "configId": "no-such-config"}])
    assert (reply.status, reply.error["cause"]["message"]) == (404, "config with id no-such-config not found")
    reply = await admin.post(path(ids), [good, {"serviceId": ids["service"], "configId": ids["own"]},
                                         {"serviceId": ids["service"], "configId": ids["alt2"]}])
    assert (reply.status, reply.error["code"], reply.error["cause"]["field"]) == (400, "COULD_NOT_VALIDATE",
                                                                                  "serviceConfigs")
    assert reply.error["cause"]["reason"] == (f"configs {ids['own']} and {ids['alt2']} have the same config type "
                                              f"{INTERCEPT}; an identity may override only one config of each type "
                                              "per service")
    for body, field, reason in (
            (None, "serviceConfigs", "serviceConfigs in body is required"),
            ({"serviceId": ids["service"]}, "serviceConfigs", "serviceConfigs in body must be of type array"),
            ([{"serviceId": ids["service"]}], "serviceConfigs[0].configId",
             "serviceConfigs[0].configId in body is required"),
            ([good, {"serviceId": 7, "configId": ids["host"]}], "serviceConfigs[1].serviceId",
             "serviceConfigs[1].serviceId in body must be of type string")):
        reply = await admin.post(path(ids), body)
        assert (reply.status, reply.error["cause"]["field"], reply.error["cause"]["reason"]) == (400, field, reason)
    reply = await admin.delete(path(ids), json={"serviceId": ids["service"]})
    assert (reply.status, reply.error["cause"]["field"]) == (400, "serviceConfigIdPairs")
    # A JSON null is a body, and not a list of pairs: it removes nothing (only no body at all means every one).
    reply = await admin.delete(path(ids), raw=b"null", headers={"Content-Type": "application/json"})
    assert (reply.status, reply.error["cause"]["field"]) == (400, "serviceConfigIdPairs")
    assert await overrides(admin, ids) == before


async def test_remove_listed_pairs_or_all(admin: Api) -> None:
    ids = await setup(admin)
    pairs = [{"serviceId": ids["service"], "configId": ids["alt"]},
             {"serviceId": ids["service"], "configId": ids["host"]}]
    assert (await admin.post(path(ids), pairs)).status == 200
    # A pair naming another config of the same type matches nothing and is ignored.
    reply = await admin.delete(path(ids), json=[pairs[0], {"serviceId": ids["service"], "configId": ids["alt2"]}])
    assert (reply.status, reply.body["data"]) == (200, {})
    assert await overrides(admin, ids) == [(ids["service"], ids["host"])]
    view = await client_view(admin, ids)
    assert view["configs"] == [ids["own"], ids["host"]]

    assert (await admin.post(path(ids), pairs[:1])).status == 200
    assert (await admin.delete(path(ids))).status == 200  # no body: every override goes
    assert await overrides(admin, ids) == []
    assert (await admin.post(path(ids), pairs)).status == 200
    assert (await admin.delete(path(ids), json=[])).status == 200
    assert await overrides(admin, ids) == []
    assert (await client_view(admin, ids))["config"] == {INTERCEPT: intercept("own.ziti")}


async def test_deleting_the_config_service_or_identity_removes_its_overrides(admin: Api,
                                                                            controller: Controller) -> None:
    ids = await setup(admin)
    other_service = await admin.create("/services", {"name": "svc2", "encryptionRequired": True})
    pairs = [{"serviceId": ids["service"], "configId": ids["alt"]},
             {"serviceId": ids["service"], "configId": ids["host"]},
             {"serviceId": other_service, "configId": ids["alt"]}]
    assert (await admin.post(path(ids), pairs)).status == 200

    assert (await admin.delete(f"/configs/{ids['alt']}")).status == 200
    assert await overrides(admin, ids) == [(ids["service"], ids["host"])]
    assert (await client_view(admin, ids))["config"] == {INTERCEPT: intercept("own.ziti"), HOST: host("10.0.0.1")}
    assert (await admin.post(path(ids), [{"serviceId": other_service, "configId": ids["alt2"]}])).status == 200
    assert (await admin.delete(f"/services/{other_service}")).status == 200
    assert await overrides(admin, ids) == [(ids["service"], ids["host"])]

    assert (await admin.delete(f"/identities/{ids['identity']}")).status == 200
    with controller.domain.read() as ctx:
        assert ctx.txn.count("service-configs") == 0


async def test_service_updates_tell_clients_to_refetch(admin: Api, autojump_clock: trio.abc.Clock) -> None:
    ids = await setup(admin)
    client = admin.with_token(ids["token"]).as_client()
    before = (await client.get("/current-api-session/service-updates")).data["lastChangeAt"]
    await trio.sleep(5)
    assert (await admin.post(path(ids), [{"serviceId": ids["service"], "configId": ids["alt"]}])).status == 200
    changed = (await client.get("/current-api-session/service-updates")).data["lastChangeAt"]
    assert changed > before
    await trio.sleep(5)
    assert (await admin.delete(path(ids))).status == 200
    assert (await client.get("/current-api-session/service-updates")).data["lastChangeAt"] > changed
