"""Timestamps and ids stamped on every row: ``controller.clock.format_time`` and ``controller.ids.new_id``."""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime

import pytest

from controller.clock import format_time, parse_time
from controller.ids import ID_ALPHABET, ID_LENGTH, IdSequence, new_id


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


def test_new_ids_are_ten_characters_of_the_alphabet_and_strictly_increasing() -> None:
    alphabet = set(string.ascii_letters + string.digits)
    ids = [new_id() for _ in range(20_000)]
    assert all(len(i) == ID_LENGTH and set(i) <= alphabet for i in ids)
    assert ids == sorted(set(ids))  # unique, and byte order is creation order


def test_new_id_encodes_the_millisecond_before_the_sequence() -> None:
    ids = IdSequence()
    first = ids.next(1_795_256_430.456)  # 2026-11-21T10:20:30.456Z
    elapsed = 1_795_256_430_456 - 1_577_836_800_000
    assert first[:7] == _base62(elapsed, 7)
    # The sequence starts in the lower half of its range, then counts up within the millisecond.
    assert _decode(first[7:]) < 62**3 // 2
    assert ids.next(1_795_256_430.456) == first[:7] + _base62(_decode(first[7:]) + 1, 3)


def test_new_ids_stay_ordered_when_the_clock_goes_back() -> None:
    ids = IdSequence()
    ahead = ids.next(1_900_000_000.0)
    behind = [ids.next(1_800_000_000.0) for _ in range(3)]
    assert [ahead, *behind] == sorted({ahead, *behind})
    assert all(i[:7] == ahead[:7] for i in behind)  # still the later millisecond


def _base62(value: int, width: int) -> str:
    chars = ""
    for _ in range(width):
        value, digit = divmod(value, 62)
        chars = ID_ALPHABET[digit] + chars
    return chars


def _decode(text: str) -> int:
    value = 0
    for ch in text:
        value = value * 62 + ID_ALPHABET.index(ch)
    return value


def test_a_full_millisecond_borrows_the_next() -> None:
    ids = IdSequence()
    made = [ids.next(1_800_000_000.0) for _ in range(62**3 + 1)]  # more than one millisecond holds
    assert made == sorted(set(made))
    assert made[-1][:7] == _base62(1_800_000_000_000 - 1_577_836_800_000 + 1, 7)
