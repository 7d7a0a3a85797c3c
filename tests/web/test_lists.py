"""Lists over HTTP: the ZitiQL filter, sorting, paging, the list ``meta`` block, and index use (behavior.md §6)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from storage.store import ReadTxn
from tests.support import Api

NO_LIMIT = 9223372036854775807

# name -> (roleAttributes, isAdmin, defaultHostingCost, externalId, tags)
PEOPLE: dict[str, tuple[list[str], bool, int, str | None, dict[str, Any]]] = {
    "lst-alice": (["eng", "ops"], True, 10, "ext-alice", {"team": "blue", "level": "3"}),
    "lst-bob": (["eng"], False, 20, None, {"team": "red"}),
    "lst-Carol": (["ops"], False, 30, "ext-carol", {"team": "blue", "remote": True}),
    "lst-dave": ([], False, 40, None, {}),
}


async def _people(admin: Api) -> dict[str, str]:
    ids = {}
    for name, (attributes, is_admin, cost, external_id, tags) in PEOPLE.items():
        ids[name] = await admin.create("/identities", {
            "name": name, "type": "User", "isAdmin": is_admin, "roleAttributes": attributes,
            "defaultHostingCost": cost, "externalId": external_id, "tags": tags})
    return ids


async def _names(admin: Api, path: str, filter_text: str, **query: str) -> list[str]:
    reply = await admin.get(path, query={"filter": filter_text, "limit": "-1", **query})
    assert reply.status == 200, (filter_text, reply.body)
    return [row["name"] for row in reply.data]


async def _matching(admin: Api, filter_text: str) -> set[str]:
    """Names of the test identities (the default admin left out) that match ``filter_text``."""
    names = await _names(admin, "/identities", f'name contains "lst-" and ({filter_text})')
    return set(names)


FILTERS = [
    ('name = "lst-bob"', {"lst-bob"}),
    ('name != "lst-bob"', {"lst-alice", "lst-Carol", "lst-dave"}),
    ('name = "LST-BOB"', set()),  # string equality is case-sensitive
    ('name in ["lst-bob", "lst-dave", "nobody"]', {"lst-bob", "lst-dave"}),
    ('name not in ["lst-bob", "lst-dave"]', {"lst-alice", "lst-Carol"}),
    ('name contains "o"', {"lst-bob", "lst-Carol"}),
    ('name not contains "o"', {"lst-alice", "lst-dave"}),
    ('name icontains "CAROL"', {"lst-Carol"}),
    ('name not icontains "CAROL"', {"lst-alice", "lst-bob", "lst-dave"}),
    ('name < "lst-b"', {"lst-Carol", "lst-alice"}),  # byte order: upper case sorts first
    ("defaultHostingCost > 20", {"lst-Carol", "lst-dave"}),
    ("defaultHostingCost >= 20", {"lst-bob", "lst-Carol", "lst-dave"}),
    ("defaultHostingCost <= 10", {"lst-alice"}),
    ("defaultHostingCost between 20 and 40", {"lst-bob", "lst-Carol"}),  # half-open
    ("defaultHostingCost not between 20 and 40", {"lst-alice", "lst-dave"}),
    ("defaultHostingCost in [10, 40]", {"lst-alice", "lst-dave"}),
    ("isAdmin", {"lst-alice"}),
    ("isAdmin = false", {"lst-bob", "lst-Carol", "lst-dave"}),
    ("not isAdmin", {"lst-bob", "lst-Carol", "lst-dave"}),
    ("externalId = null", {"lst-bob", "lst-dave"}),
    ("externalId != null", {"lst-alice", "lst-Carol"}),
    ('type = "User"', set(PEOPLE)),
    ('anyOf(roleAttributes) = "eng"', {"lst-alice", "lst-bob"}),
    ('anyOf(roleAttributes) in ["ops", "nothing"]', {"lst-alice", "lst-Carol"}),
    ('allOf(roleAttributes) = "eng"', {"lst-bob"}),
    ("count(roleAttributes) > 1", {"lst-alice"}),
    ("count(roleAttributes) = 0", {"lst-dave"}),
    ("isEmpty(roleAttributes)", {"lst-dave"}),
    ("not isEmpty(roleAttributes)", {"lst-alice", "lst-bob", "lst-Carol"}),
    ('tags.team = "blue"', {"lst-alice", "lst-Carol"}),
    ("tags.level = \"3\"", {"lst-alice"}),
    ("tags.remote = true", {"lst-Carol"}),
    ("tags.team = null", {"lst-dave"}),
    ('isAdmin or name = "lst-dave"', {"lst-alice", "lst-dave"}),
    ('(isAdmin or name = "lst-dave") and defaultHostingCost > 10', {"lst-dave"}),
    ('not (name = "lst-bob" or name = "lst-dave")', {"lst-alice", "lst-Carol"}),
    ('NAME = "x" OR name = "lst-bob"', None),  # identifiers are case-sensitive: unknown symbol NAME
    ('name = "lst-bob" AND isAdmin = FALSE', {"lst-bob"}),  # keywords are not
    ("createdAt > datetime(2000-01-01T00:00:00Z)", set(PEOPLE)),
    ("createdAt < datetime(2000-01-01T00:00:00Z)", set()),
    ("createdAt between datetime(2000-01-01T00:00:00Z) and datetime(2999-01-01T00:00:00+02:00)", set(PEOPLE)),
]


@pytest.mark.parametrize(("filter_text", "expected"), FILTERS, ids=[f for f, _ in FILTERS])
async def test_filter_operators_on_identities(admin: Api, filter_text: str, expected: set[str] | None) -> None:
    await _people(admin)
    if expected is None:
        reply = await admin.get("/identities", query={"filter": filter_text})
        assert (reply.status, reply.error["code"]) == (400, "INVALID_FILTER")
        return
    assert await _matching(admin, filter_text) == expected


async def test_filters_on_services_and_policy_type_numbers(admin: Api) -> None:
    await admin.create("/services", {"name": "svc-plain", "encryptionRequired": True, "maxIdleTimeMillis": 5})
    await admin.create("/services", {"name": "svc-open", "encryptionRequired": False, "roleAttributes": ["web"]})
    assert await _names(admin, "/services", "encryptionRequired = false") == ["svc-open"]
    assert await _names(admin, "/services", "maxIdleTimeMillis = 5") == ["svc-plain"]
    assert await _names(admin, "/services", 'anyOf(roleAttributes) = "web"') == ["svc-open"]
    assert await _names(admin, "/services", 'terminatorStrategy = "smartrouting" sort by name') == [
        "svc-open", "svc-plain"]
    for name, kind in (("dial-all", "Dial"), ("bind-all", "Bind")):
        await admin.create("/service-policies", {"name": name, "type": kind, "semantic": "AnyOf",
                                                 "identityRoles": ["#all"], "serviceRoles": ["#web"]})
    # The policy type is filtered as a number (Dial=1, Bind=2), as in the reference.
    assert await _names(admin, "/service-policies", "type = 2") == ["bind-all"]
    assert await _names(admin, "/service-policies", 'anyOf(serviceRoles) = "#web" sort by name') == [
        "bind-all", "dial-all"]


async def test_sort_parameter_and_sort_by_in_the_filter(admin: Api) -> None:
    await _people(admin)
    base = 'name contains "lst-"'
    assert await _names(admin, "/identities", base, sort="name") == ["lst-Carol", "lst-alice", "lst-bob", "lst-dave"]
    assert await _names(admin, "/identities", base, sort="name desc") == [
        "lst-dave", "lst-bob", "lst-alice", "lst-Carol"]
    assert await _names(admin, "/identities", base, sort="defaultHostingCost desc, name") == [
        "lst-dave", "lst-Carol", "lst-bob", "lst-alice"]
    # A sort written in the filter wins over the parameter.
    assert await _names(admin, "/identities", f"{base} sort by defaultHostingCost asc", sort="name desc") == [
        "lst-alice", "lst-bob", "lst-Carol", "lst-dave"]
    assert await _names(admin, "/identities", f"{base} sort by isAdmin desc, name desc") == [
        "lst-alice", "lst-dave", "lst-bob", "lst-Carol"]


async def test_default_order_is_ascending_id(admin: Api) -> None:
    await _people(admin)
    reply = await admin.get("/identities", query={"limit": "-1"})
    ids = [row["id"] for row in reply.data]
    assert ids == sorted(ids, key=str.encode)


@pytest.mark.parametrize("sort", ["nosuchfield", "name sideways", "roleAttributes", "tags", "name,,id"])
async def test_bad_sort_parameter_is_invalid_sort_identifier(admin: Api, sort: str) -> None:
    reply = await admin.get("/identities", query={"sort": sort})
    assert reply.status == 400, reply.body
    assert reply.error["code"] == "INVALID_SORT_IDENTIFIER"
    assert reply.error["message"] == "The sort order supplied is invalid"


async def _page(admin: Api, **query: str) -> tuple[int, dict[str, Any]]:
    reply = await admin.get("/identities", query=query)
    assert reply.status == 200, reply.body
    return len(reply.data), reply.body["meta"]["pagination"]


async def test_limit_and_offset_rules(admin: Api) -> None:
    for i in range(12):
        await admin.create("/identities", {"name": f"page-{i:02}", "type": "User", "isAdmin": False})
    total = 13  # and the default admin
    assert await _page(admin) == (10, {"limit": 10, "offset": 0, "totalCount": total})
    for limit in ("0", "-2", "-100"):
        assert await _page(admin, limit=limit) == (10, {"limit": 10, "offset": 0, "totalCount": total})
    assert await _page(admin, limit="3") == (3, {"limit": 3, "offset": 0, "totalCount": total})
    assert await _page(admin, limit="501") == (total, {"limit": 500, "offset": 0, "totalCount": total})
    assert await _page(admin, limit="-1") == (total, {"limit": NO_LIMIT, "offset": 0, "totalCount": total})
    assert await _page(admin, filter="limit none") == (total, {"limit": NO_LIMIT, "offset": 0, "totalCount": total})
    assert await _page(admin, limit="5", offset="10") == (3, {"limit": 5, "offset": 10, "totalCount": total})
    assert await _page(admin, offset="-4") == (10, {"limit": 10, "offset": 0, "totalCount": total})
    assert await _page(admin, offset="200000") == (0, {"limit": 10, "offset": 100000, "totalCount": total})
    # skip/limit inside the filter win over the parameters; totalCount ignores paging.
    assert await _page(admin, filter="skip 2 limit 4", limit="1", offset="0") == (
        4, {"limit": 4, "offset": 2, "totalCount": total})
    assert await _page(admin, filter='name contains "page-" limit 2') == (
        2, {"limit": 2, "offset": 0, "totalCount": 12})
    assert await _page(admin, filter="limit 900") == (total, {"limit": 500, "offset": 0, "totalCount": total})


async def test_pages_follow_the_sort(admin: Api) -> None:
    for i in range(7):
        await admin.create("/identities", {"name": f"page-{i}", "type": "User", "isAdmin": False})
    seen = []
    for offset in (0, 3, 6):
        reply = await admin.get("/identities", query={"filter": 'name contains "page-" sort by name desc',
                                                      "limit": "3", "offset": str(offset)})
        seen += [row["name"] for row in reply.data]
    assert seen == [f"page-{i}" for i in reversed(range(7))]


@pytest.mark.parametrize(("name", "value"), [("limit", "ten"), ("limit", "1.5"), ("offset", "x"), ("offset", "2e3")])
async def test_non_integer_paging_is_invalid_pagination(admin: Api, name: str, value: str) -> None:
    reply = await admin.get("/identities", query={name: value})
    assert reply.status == 400
    assert reply.error["code"] == "INVALID_PAGINATION"
    assert reply.error["message"] == "The pagination properties provided are invalid"
    assert reply.error["cause"]["field"] == name
    assert reply.error["cause"]["value"] == value


async def test_meta_lists_the_filterable_fields(admin: Api) -> None:
    reply = await admin.get("/identities")
    fields = set(reply.body["meta"]["filterableFields"])
    assert {"id", "createdAt", "updatedAt", "tags", "isSystem", "name", "roleAttributes", "externalId", "type",
            "authPolicyId", "isAdmin", "isDefaultAdmin"} <= fields
    reply = await admin.get("/posture-checks")
    assert set(reply.body["meta"]["filterableFields"]) == {
        "id", "createdAt", "updatedAt", "tags", "isSystem", "name", "reportOnly", "promptOnWake", "promptOnUnlock"}


@pytest.mark.parametrize(("filter_text", "message"), [
    ('name = "x" and', "line 1:14"),
    ('name == "x"', "line 1:6"),
    ('name = "unterminated', "line 1:7"),
    ("name =\n  5x", "line 2:"),
    ('nosuchfield = "x"', "unknown symbol 'nosuchfield'"),
    ('roleAttributes = "x"', "roleAttributes"),
    ('name = 5', "name"),
    ("isAdmin = datetime(not-a-date)", "datetime"),
    ("limit ten", "line 1:"),
])
async def test_invalid_filter_says_what_and_where(admin: Api, filter_text: str, message: str) -> None:
    reply = await admin.get("/identities", query={"filter": filter_text})
    assert reply.status == 400, reply.body
    assert reply.error["code"] == "INVALID_FILTER"
    assert reply.error["message"] == "The filter query supplied is invalid"
    assert reply.error["cause"]["code"] == "UNHANDLED"
    assert message in reply.error["cause"]["message"]


async def test_posture_check_type_and_attributes_are_not_filterable(admin: Api) -> None:
    await admin.create("/posture-checks", {"name": "wake", "typeId": "MFA", "promptOnWake": True,
                                           "roleAttributes": ["mfa"]})
    await admin.create("/posture-checks", {"name": "plain", "typeId": "MFA"})
    for bad in ('typeId = "MFA"', 'anyOf(roleAttributes) = "mfa"'):
        reply = await admin.get("/posture-checks", query={"filter": bad})
        assert (reply.status, reply.error["code"]) == (400, "INVALID_FILTER"), bad
    assert await _names(admin, "/posture-checks", 'name = "plain"') == ["plain"]
    assert await _names(admin, "/posture-checks", "promptOnWake = true") == ["wake"]
    assert await _names(admin, "/posture-checks", "not promptOnUnlock sort by name") == ["plain", "wake"]
    # Attributes are selected with roleFilter instead.
    reply = await admin.get("/posture-checks", query={"roleFilter": "#mfa"})
    assert [row["name"] for row in reply.data] == ["wake"]


# Index use ---------------------------------------------------------------------------------------------------


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record every full scan of a kind (by anyone: list requests, sessions, actors)."""
    scanned: list[str] = []
    original = ReadTxn.scan

    def scan(self: ReadTxn, kind: str, fields: frozenset[str] | None = None) -> Iterator[dict[str, Any]]:
        scanned.append(kind)
        return original(self, kind, fields)

    monkeypatch.setattr(ReadTxn, "scan", scan)
    yield scanned


async def test_indexed_filters_do_not_scan(admin: Api, scans: list[str]) -> None:
    ids = await _people(admin)
    # Rows without the attributes: an index is used when it leaves out most of a kind (see the next test).
    for n in range(6):
        await admin.create("/identities", {"name": f"other-{n}", "type": "Device", "isAdmin": False})
    cases = [
        ('name = "lst-bob"', ["lst-bob"]),
        (f'id in ["{ids["lst-alice"]}", "{ids["lst-dave"]}", "missing"] sort by name', ["lst-alice", "lst-dave"]),
        (f'id = "{ids["lst-Carol"]}"', ["lst-Carol"]),
        ('anyOf(roleAttributes) = "ops" sort by name', ["lst-Carol", "lst-alice"]),
        ('anyOf(roleAttributes) in ["eng", "ops"] and isAdmin = false sort by name', ["lst-Carol", "lst-bob"]),
        ('name in ["lst-bob", "lst-dave"] and defaultHostingCost > 30', ["lst-dave"]),
        ('name = "nobody"', []),
    ]
    for filter_text, expected in cases:
        scans.clear()
        reply = await admin.get("/identities", query={"filter": filter_text})
        assert reply.status == 200, (filter_text, reply.body)
        assert [row["name"] for row in reply.data] == expected, filter_text
        assert reply.body["meta"]["pagination"]["totalCount"] == len(expected)
        assert "identities" not in scans, filter_text
    # The counterpart: a filter no index can answer does scan, so the check above is on the list path.
    scans.clear()
    reply = await admin.get("/identities", query={"filter": 'name contains "lst-" or isAdmin'})
    assert len(reply.data) == len(PEOPLE) + 1
    assert "identities" in scans


async def test_a_role_attribute_most_rows_hold_is_matched_in_one_pass(admin: Api, scans: list[str]) -> None:
    """Reading half a kind or more through the index costs more than one pass over it (controller/data/listing.py)."""
    await _people(admin)
    cases = [
        # 2 of 5 identities: the index.
        ('anyOf(roleAttributes) = "ops" sort by name', ["lst-Carol", "lst-alice"], False),
        # 2 + 2 of 5 (alice holds both): one pass, the same answer as an index would give.
        ('anyOf(roleAttributes) in ["eng", "ops"] sort by name', ["lst-Carol", "lst-alice", "lst-bob"], True),
        ('anyOf(roleAttributes) in ["eng", "ops"] and isAdmin = false sort by name', ["lst-Carol", "lst-bob"], True),
    ]
    for filter_text, expected, scanned in cases:
        scans.clear()
        reply = await admin.get("/identities", query={"filter": filter_text})
        assert [row["name"] for row in reply.data] == expected, filter_text
        assert reply.body["meta"]["pagination"]["totalCount"] == len(expected)
        assert ("identities" in scans) is scanned, filter_text
    # A roleFilter narrows first; the hint then only intersects, whatever its share.
    scans.clear()
    reply = await admin.get("/identities", query={"filter": 'anyOf(roleAttributes) in ["eng", "ops"]',
                                                  "roleFilter": "#ops"})
    assert sorted(row["name"] for row in reply.data) == ["lst-Carol", "lst-alice"]
    assert "identities" not in scans
