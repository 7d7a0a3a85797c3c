"""A ``contains`` conjunct over remembered candidates: one text search finds the rows the predicate then tests.

``controller/data/listing.py`` keeps an index hint's candidates, or every row of a kind, decoded in the kind's memo
until the kind is next written, with a text column of each field a ``contains`` conjunct searches. These tests count the
rows a list decodes and the rows its predicate tests, and check every answer against the names and roles written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.data import listing
from storage.store import ReadTxn
from storage.zitiql import Query
from tests.support import Api

N = 60


def _role(n: int) -> str:
    return "users" if n % 3 == 0 else "ops"  # a third: an index hint narrows to them


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """``decoded``: identity rows decoded for a filter (only the fields it reads); ``tested``: rows its predicate
    tested."""
    counted = {"decoded": 0, "tested": 0}
    get_many, scan, compile_filter = ReadTxn.get_many, ReadTxn.scan, listing.compile_filter

    def counting_get_many(self: ReadTxn, kind: str, ids: Any, fields: frozenset[str] | None = None) -> Any:
        rows = get_many(self, kind, ids, fields)
        if kind == "identities" and fields is not None:
            counted["decoded"] += len(rows)
        return rows

    def counting_scan(self: ReadTxn, kind: str, fields: frozenset[str] | None = None) -> Iterator[dict[str, Any]]:
        for row in scan(self, kind, fields):
            if kind == "identities" and fields is not None:
                counted["decoded"] += 1
            yield row

    def counting(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
        def counted_test(row: Any) -> bool:
            counted["tested"] += 1
            return test(row)

        return counted_test

    def counting_compile(text: str | None, symbols: Any) -> Query:
        query = compile_filter(text, symbols)
        residual = None if query.residual is None else counting(query.residual)
        return dataclasses.replace(query, predicate=counting(query.predicate), residual=residual)

    monkeypatch.setattr(ReadTxn, "get_many", counting_get_many)
    monkeypatch.setattr(ReadTxn, "scan", counting_scan)
    monkeypatch.setattr(listing, "compile_filter", counting_compile)
    yield counted


async def _people(admin: Api) -> dict[str, str]:
    """Names by id."""
    names = {}
    for n in range(N):
        name = f"srch-{n:03d}"
        names[await admin.create("/identities", {"name": name, "type": "User", "isAdmin": False,
                                                 "roleAttributes": [_role(n)]})] = name
    return names


async def _listed(admin: Api, filter_text: str, counts: dict[str, int]) -> list[str]:
    counts["decoded"] = counts["tested"] = 0
    reply = await admin.get("/identities", query={"filter": filter_text, "limit": "-1"})
    assert reply.status == 200, reply.body
    assert reply.body["meta"]["pagination"]["totalCount"] == len(reply.data)
    return [row["name"] for row in reply.data]


def _users_holding(text: str) -> list[str]:
    return [f"srch-{n:03d}" for n in range(N) if _role(n) == "users" and text in f"srch-{n:03d}"]


async def test_an_index_hints_candidates_are_decoded_once_and_searched(admin: Api, counts: dict[str, int]) -> None:
    await _people(admin)
    users = N // 3
    # The first list decodes the hint's candidates (the fields the filter reads); its predicate tests only the
    # rows the search of their names found.
    assert await _listed(admin, 'anyOf(roleAttributes) = "users" and name contains "1"', counts) \
        == _users_holding("1") == ["srch-012", "srch-015", "srch-018", "srch-021", "srch-051"]
    assert counts == {"decoded": users, "tested": 5}
    # Another text over the same candidates: nothing decoded again, again only what the search found is tested.
    for text in ("2", "srch-0", "05", "99", "srch-057"):
        assert await _listed(admin, f'anyOf(roleAttributes) = "users" and name contains "{text}"', counts) \
            == _users_holding(text)
        assert counts == {"decoded": 0, "tested": len(_users_holding(text))}, text
    # A second conjunct left to the predicate: it decides on the rows the search found.
    assert await _listed(admin, 'anyOf(roleAttributes) = "users" and name contains "0" and name contains "3"',
                         counts) == [name for name in _users_holding("0") if "3" in name]
    assert counts == {"decoded": 0, "tested": len(_users_holding("0"))}


async def test_every_row_of_a_kind_is_searched_when_no_index_answers(admin: Api, counts: dict[str, int]) -> None:
    await _people(admin)
    everyone = N + 1  # and the default admin
    assert await _listed(admin, 'name contains "srch-04"', counts) == [f"srch-{n:03d}" for n in range(40, 50)]
    assert counts == {"decoded": everyone, "tested": 10}
    assert await _listed(admin, 'name contains "9"', counts) == [f"srch-{n:03d}" for n in range(9, N, 10)]
    assert counts == {"decoded": 0, "tested": 6}
    # Another field read: those rows are decoded (once), and the search still narrows what the predicate tests.
    holding_9 = [f"srch-{n:03d}" for n in range(9, N, 10) if _role(n) == "ops"]
    for decoded in (everyone, 0):
        assert await _listed(admin, 'name contains "9" and anyOf(roleAttributes) = "ops"', counts) == holding_9
        assert counts == {"decoded": decoded, "tested": 6}


async def test_a_text_the_column_cannot_search_leaves_every_candidate_to_the_predicate(
        admin: Api, counts: dict[str, int]) -> None:
    await _people(admin)
    assert await _listed(admin, 'anyOf(roleAttributes) = "users" and name contains ""', counts) \
        == _users_holding("")
    assert counts == {"decoded": N // 3, "tested": N // 3}


async def test_a_write_renews_the_searched_candidates(admin: Api, counts: dict[str, int]) -> None:
    names = await _people(admin)
    assert await _listed(admin, 'anyOf(roleAttributes) = "users" and name contains "7"', counts) \
        == ["srch-027", "srch-057"]
    renamed = next(identity_id for identity_id, name in names.items() if name == "srch-027")
    assert (await admin.patch(f"/identities/{renamed}", {"name": "srch-x"})).status == 200
    await admin.create("/identities", {"name": "srch-777", "type": "User", "isAdmin": False,
                                       "roleAttributes": ["users"]})
    assert await _listed(admin, 'anyOf(roleAttributes) = "users" and name contains "7"', counts) \
        == ["srch-057", "srch-777"]
    assert counts == {"decoded": N // 3 + 1, "tested": 2}
