"""How much a list reads: a page costs its own rows, and a filter decodes only the fields it reads.

Every case also checks the answer against the one a whole-row listing (``limit none``) gives, so reading less never
changes a page.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from storage.store import ReadTxn
from tests.support import Api

N = 24


@pytest.fixture
def whole_rows(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many whole identity rows list reads decode (``get_many`` and ``scan`` without ``fields``)."""
    counts = {"identities": 0}
    get_many, scan = ReadTxn.get_many, ReadTxn.scan

    def counting_get_many(self: ReadTxn, kind: str, ids: Any, fields: frozenset[str] | None = None) -> Any:
        rows = get_many(self, kind, ids, fields)
        if kind in counts and fields is None:
            counts[kind] += len(rows)
        return rows

    def counting_scan(self: ReadTxn, kind: str, fields: frozenset[str] | None = None) -> Iterator[dict[str, Any]]:
        for row in scan(self, kind, fields):
            if kind in counts and fields is None:
                counts[kind] += 1
            yield row

    monkeypatch.setattr(ReadTxn, "get_many", counting_get_many)
    monkeypatch.setattr(ReadTxn, "scan", counting_scan)
    yield counts


async def _people(admin: Api) -> list[dict[str, Any]]:
    for n in range(N):
        await admin.create("/identities", {
            "name": f"rd-{(n * 7) % N:02d}", "type": "User", "isAdmin": n % 5 == 0,
            "roleAttributes": ["even" if n % 2 == 0 else "odd"], "tags": {"rank": str(n % 3)}})
    reply = await admin.get("/identities", query={"limit": "-1"})
    assert reply.status == 200
    return list(reply.data)


async def _page(admin: Api, **query: str) -> tuple[list[str], int]:
    reply = await admin.get("/identities", query=query)
    assert reply.status == 200, reply.body
    return [row["id"] for row in reply.data], reply.body["meta"]["pagination"]["totalCount"]


async def test_a_plain_page_reads_only_its_own_rows(admin: Api, whole_rows: dict[str, int]) -> None:
    everyone = await _people(admin)
    whole_rows["identities"] = 0
    assert await _page(admin, limit="5", offset="10") == ([row["id"] for row in everyone[10:15]], N + 1)
    assert whole_rows["identities"] == 5
    # Past the end: an empty page, the full count, nothing read.
    whole_rows["identities"] = 0
    assert await _page(admin, limit="5", offset="100") == ([], N + 1)
    assert whole_rows["identities"] == 0


async def test_a_filter_on_stored_fields_decodes_only_the_page_whole(admin: Api, whole_rows: dict[str, int]) -> None:
    everyone = await _people(admin)
    cases = [
        ('name contains "rd-1"', {}),
        ('name contains "rd-" and tags.rank = "1" sort by name desc', {}),
        ('anyOf(roleAttributes) = "even" and not isAdmin', {"sort": "name"}),
        ("", {"sort": "name desc", "offset": "3"}),
        ("", {"roleFilter": "#odd"}),
    ]
    for filter_text, extra in cases:
        whole_rows["identities"] = 0
        page = await _page(admin, filter=filter_text, limit="4", **extra)
        # The filter read partial rows (or only ids); the page's four rows were the only ones read whole.
        assert whole_rows["identities"] == 4, filter_text
        # The same listing with whole rows throughout (limit none reads every match whole), then paged here.
        every = await _page(admin, filter=filter_text, limit="-1", **{k: v for k, v in extra.items() if k != "offset"})
        start = int(extra.get("offset", "0"))
        assert page == (every[0][start:start + 4], every[1]), filter_text
        assert 4 < page[1] <= len(everyone), filter_text


async def test_a_filter_on_a_computed_field_still_reads_whole_rows(admin: Api, whole_rows: dict[str, int]) -> None:
    await _people(admin)
    whole_rows["identities"] = 0
    ids, total = await _page(admin, filter='isSystem = false and name contains "rd-"', limit="2")
    assert (len(ids), total) == (2, N)
    assert whole_rows["identities"] == N + 1
