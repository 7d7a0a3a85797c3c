"""Filtered lists give the answers of the plain evaluation: every row of the kind, decoded whole, tested by the
whole predicate, sorted and paged.

``controller/data/listing.py`` takes shortcuts (candidates from an index, only the conjuncts the index did not answer,
projected rows remembered until the kind is next written); these tests compare its rows, their order and the
``meta`` block with the plain evaluation over varied filters, sorts, pages and role filters, before and after
writes that change which rows match.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.access.roles import parse_semantic, select_ids
from controller.data.listing import ListParams, Page, list_rows, page_values
from controller.runtime.composition import Controller
from storage.zitiql import compile_filter, order_rows, parse_sort
from tests.support import ADMIN_PASSWORD, ADMIN_USERNAME, Api, running
from web.app import create_app

ROLE_SETS = (["users"], ["users", "ops"], ["ops"], ["users", "eu"], [], ["eu", "us"], ["users", "us", "ops"])

FILTERS = (
    'anyOf(roleAttributes) = "users" and name contains "7"',
    'anyOf(roleAttributes) = "users"',
    'anyOf(roleAttributes) in ["ops", "eu"] and not (name contains "1")',
    'allOf(roleAttributes) = "users"',
    'allOf(roleAttributes) = "users" and name contains "2"',
    'name = "user-0007"',
    'name in ["user-0001", "user-0002", "nobody"] and anyOf(roleAttributes) = "users"',
    'name contains "00" or anyOf(roleAttributes) = "eu"',
    'anyOf(roleAttributes) = "users" and isAdmin = false sort by name desc',
    'isEmpty(roleAttributes)',
    'name icontains "USER-01"',
    'anyOf(roleAttributes) = "users" and name contains "9" sort by name skip 2 limit 5',
    'anyOf(roleAttributes) = "ops" and anyOf(roleAttributes) = "users" and name contains "3"',
    'anyOf(roleAttributes) = "nobody-holds-this"',
    'name contains "-"',
    'anyOf(roleAttributes) = "users" and (name contains "4" or name contains "5") sort by createdAt desc',
)
PAGES = (
    ListParams(limit="10"),
    ListParams(limit="7", offset="3", sort="name desc"),
    ListParams(limit="-1"),
    ListParams(limit="500", offset="40"),
)


def _plain(controller: Controller, params: ListParams) -> Page:
    """The answer of the plain evaluation (what the listing answered before it took any shortcut)."""
    with controller.domain.read() as ctx:
        symbols = ctx.registry.symbols("identities")
        query = compile_filter(params.filter, symbols)
        limit, offset = page_values(query.limit, query.skip, params)
        sort = query.sort or (tuple(parse_sort(params.sort, symbols)) if params.sort else ())
        rows = list(ctx.txn.scan("identities"))
        if params.role_filter:
            selected = select_ids(ctx.txn, "identities", params.role_filter, parse_semantic(params.role_semantic),
                                  all_special=False)
            rows = [row for row in rows if row["id"] in selected]
        matched = [row for row in rows if query.predicate(row)]
        ordered = order_rows(matched, sort, symbols) if sort else matched
        window = ordered[offset:] if limit == -1 else ordered[offset:offset + limit]
        meta = {"filterableFields": sorted(symbols),
                "pagination": {"limit": 9223372036854775807 if limit == -1 else limit, "offset": offset,
                               "totalCount": len(matched)}}
        return Page(list(window), meta)


def _listed(controller: Controller, params: ListParams) -> Page:
    with controller.domain.read() as ctx:
        return list_rows(ctx, controller.registry["identities"], params)


def _rows(page: Page) -> list[Mapping[str, Any]]:
    return [dict(row) for row in page.rows]


async def _compare_all(controller: Controller, admin: Api) -> int:
    """Compare every filter on every page shape, twice (the second time from what the first remembered); also
    through HTTP for the ids. Returns how many rows the comparisons matched in all."""
    matched = 0
    for round_ in range(2):
        for text in FILTERS:
            for page in PAGES:
                params = ListParams(filter=text, limit=page.limit, offset=page.offset, sort=page.sort)
                expected, got = _plain(controller, params), _listed(controller, params)
                assert _rows(got) == _rows(expected), (round_, text, page)
                assert got.meta == expected.meta, (round_, text, page)
                matched += int(expected.meta["pagination"]["totalCount"])
            reply = await admin.get("/identities", query={"filter": text, "limit": "25"})
            assert reply.status == 200, reply.body
            expected = _plain(controller, ListParams(filter=text, limit="25"))
            assert [row["id"] for row in reply.data] == [row["id"] for row in expected.rows], text
            assert reply.body["meta"]["pagination"] == expected.meta["pagination"], text
        roles = ListParams(filter='anyOf(roleAttributes) = "users" and name contains "1"', limit="50",
                           role_filter=("#ops",), role_semantic="AnyOf")
        assert _rows(_listed(controller, roles)) == _rows(_plain(controller, roles))
        assert _listed(controller, roles).meta == _plain(controller, roles).meta
    return matched


async def test_filtered_lists_answer_as_the_plain_evaluation_before_and_after_writes(tmp_path: Path) -> None:
    async with running(tmp_path / "data") as controller:
        admin = await Api(create_app(controller), controller=controller).login(ADMIN_USERNAME, ADMIN_PASSWORD)
        ids = [await admin.create("/identities", {"name": f"user-{n:04d}", "type": "User", "isAdmin": n % 17 == 0,
                                                  "roleAttributes": ROLE_SETS[n % len(ROLE_SETS)]})
               for n in range(240)]
        assert await _compare_all(controller, admin) > 1000  # the filters really select rows

        # Writes that change which rows match: roles moved, names changed, rows deleted and created.
        for n, identity_id in enumerate(ids[:60]):
            reply = await admin.patch(f"/identities/{identity_id}",
                                      {"roleAttributes": ROLE_SETS[(n + 3) % len(ROLE_SETS)]})
            assert reply.status == 200, reply.body
        for identity_id in ids[60:70]:
            assert (await admin.patch(f"/identities/{identity_id}", {"name": f"renamed-{identity_id}7"})).status \
                == 200
        for identity_id in ids[70:90]:
            assert (await admin.delete(f"/identities/{identity_id}")).status == 200
        for n in range(30):
            await admin.create("/identities", {"name": f"user-9{n:03d}", "type": "Device", "isAdmin": False,
                                               "roleAttributes": ["users", "late"]})
        await _compare_all(controller, admin)

        # One more write between two identical lists: the second sees it.
        params = ListParams(filter='anyOf(roleAttributes) = "users" and name contains "user-9"', limit="-1")
        before = _listed(controller, params).meta["pagination"]["totalCount"]
        await admin.create("/identities", {"name": "user-9999", "type": "Device", "isAdmin": False,
                                           "roleAttributes": ["users"]})
        after = _listed(controller, params)
        assert after.meta["pagination"]["totalCount"] == before + 1
        assert _rows(after) == _rows(_plain(controller, params))
