"""A replica rebuilt from etcd in pages (controller/cluster/snapshot.py) and told to the listeners in parts
(controller/cluster/replica_apply.py): the pages' sizes follow the bytes read so far, within bounds; the parts hold
the whole difference. tests/cluster/test_cluster_scale.py rebuilds a network larger than a page and a part."""

from __future__ import annotations

import pytest

from controller.cluster.local_replica import PUBLISH_PART
from controller.cluster.replica_apply import rebuilt_parts
from controller.cluster.snapshot import FIRST_PAGE, MAX_PAGE, PAGE_BYTES, next_page
from controller.model.spec import Change


def test_the_first_page_is_the_smallest() -> None:
    assert next_page(0, 0) == FIRST_PAGE


def test_pages_follow_the_mean_size_of_what_was_read() -> None:
    assert next_page(1_000, 1_000 * 1_024) == PAGE_BYTES // 1_024
    assert next_page(10, 10 * 2_048) == PAGE_BYTES // 2_048


def test_small_values_are_read_at_most_max_page_at_a_time() -> None:
    assert next_page(512, 512 * 16) == MAX_PAGE


def test_large_values_are_read_at_least_first_page_at_a_time() -> None:
    assert next_page(512, 512 * 1024 * 1024) == FIRST_PAGE


def test_a_difference_is_told_in_parts_that_hold_all_of_it() -> None:
    rows = {("identities", f"i{n}"): b"row" for n in range(5)}
    changes = [Change("identities", f"i{n}", None, {"id": f"i{n}"}) for n in range(3)]
    parts = rebuilt_parts(7, rows, changes, 2)
    assert [len(part.rows) for part in parts] == [2, 2, 1]
    assert [len(part.changes) for part in parts] == [2, 1, 0]
    assert {key for part in parts for key in part.rows} == set(rows)
    assert [change for part in parts for change in part.changes] == changes
    assert {(part.revision, part.write_id, part.local) for part in parts} == {(7, "", False)}


def test_no_difference_is_one_empty_part() -> None:
    [part] = rebuilt_parts(3, {}, [], PUBLISH_PART)
    assert not part.rows and not part.changes
    with pytest.raises(ValueError):
        rebuilt_parts(3, {}, [], 0)
