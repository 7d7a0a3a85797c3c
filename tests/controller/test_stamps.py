"""Timestamps and ids stamped on every row: ``controller.clock.format_time`` and ``controller.crud.new_id``."""

from __future__ import annotations

import random
import string
from collections import Counter
from datetime import UTC, datetime

import pytest

from controller.clock import format_time, parse_time
from controller.crud import new_id


def _reference(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@pytest.mark.parametrize("epoch", [
    0.0, 1e-9, -1e-7, -1.5, 1_700_000_000.0, 1_700_000_000.9999995, 1_700_000_000.9999994999,
    1_700_000_000.0000005, 1_700_000_000.9995, 1_700_000_000.999, 1_700_000_001.25, 4_102_444_799.999,
])
def test_format_time_matches_datetime_at_second_boundaries(epoch: float) -> None:
    assert format_time(epoch) == _reference(epoch)


def test_format_time_matches_datetime_in_any_order() -> None:
    rng = random.Random(7)
    values = [rng.uniform(-1e9, 4e9) for _ in range(5_000)]
    values += [1_800_000_000 + i / 997 for i in range(5_000)]  # many calls within the same second, then the next
    assert [format_time(v) for v in values] == [_reference(v) for v in values]


def test_format_time_round_trips_through_parse_time() -> None:
    assert format_time(parse_time("2026-11-21T10:20:30.456Z")) == "2026-11-21T10:20:30.456Z"


def test_new_id_is_ten_characters_of_the_alphabet_spread_evenly() -> None:
    alphabet = set(string.ascii_letters + string.digits)
    ids = [new_id() for _ in range(20_000)]
    assert all(len(i) == 10 and set(i) <= alphabet for i in ids)
    assert len(set(ids)) == len(ids)
    counts = Counter(ch for i in ids for ch in i)
    assert set(counts) == alphabet
    # 200k characters over 62 letters: about 3,226 each; a biased mapping (a plain byte % 62) would give the first
    # eight letters about 3,900.
    assert max(counts.values()) < 3_600 and min(counts.values()) > 2_850
