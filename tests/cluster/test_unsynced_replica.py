"""The guard of a replica written without fsync: kept through a crash of its process, discarded after one of the
machine, removed by a clean close; and a replica that syncs where the system names no boot."""

from __future__ import annotations

from pathlib import Path

from controller.cluster.unsynced import arm, current_boot, guard_file
from storage.layout import KindLayout
from storage.store import Store

LAYOUTS = [KindLayout("things")]


def _replica_with_a_row(path: Path) -> None:
    store = Store(path, LAYOUTS, durable=False)
    try:
        with store.env.begin(write=True) as txn:
            txn.put(b"kept", b"1", db=store.meta_db)
    finally:
        store.close()


def _holds_the_row(path: Path) -> bool:
    if not path.exists():
        return False
    store = Store(path, LAYOUTS, durable=False)
    try:
        with store.env.begin() as txn:
            return txn.get(b"kept", db=store.meta_db) == b"1"
    finally:
        store.close()


def test_the_current_boot_is_named_on_linux_and_none_elsewhere(tmp_path: Path) -> None:
    assert current_boot() is not None
    assert current_boot(tmp_path / "missing") is None
    (tmp_path / "boot").write_text("abc\n")
    assert current_boot(tmp_path / "boot") == "abc"


def test_arming_writes_a_guard_naming_the_boot(tmp_path: Path) -> None:
    path = tmp_path / "db"
    guard = arm(path, "boot-1")
    assert guard is not None
    assert guard_file(path).read_text() == "boot-1"
    assert not path.exists()  # nothing there yet: the store creates it


def test_a_replica_left_open_by_a_crashed_process_of_the_same_boot_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "db"
    arm(path, "boot-1")
    _replica_with_a_row(path)  # never disarmed: the process died
    assert arm(path, "boot-1") is not None
    assert _holds_the_row(path)


def test_a_replica_left_open_when_the_machine_went_down_is_discarded(tmp_path: Path) -> None:
    path = tmp_path / "db"
    arm(path, "boot-1")
    _replica_with_a_row(path)
    guard = arm(path, "boot-2")
    assert guard is not None and guard.boot == "boot-2"
    assert not path.exists() and not _holds_the_row(path)
    assert guard_file(path).read_text() == "boot-2"


def _closed_cleanly(path: Path, boot: str) -> None:
    """A replica written without fsync in ``boot`` and closed cleanly."""
    guard = arm(path, boot)
    assert guard is not None
    _replica_with_a_row(path)
    guard.disarm()


def test_a_replica_closed_cleanly_survives_a_restart_of_the_machine(tmp_path: Path) -> None:
    path = tmp_path / "db"
    _closed_cleanly(path, "boot-1")
    assert not guard_file(path).exists()
    assert arm(path, "boot-2") is not None
    assert _holds_the_row(path)


def test_without_a_boot_id_nothing_is_armed_and_a_replica_left_unsynced_is_discarded(tmp_path: Path) -> None:
    path = tmp_path / "db"
    _closed_cleanly(path, "boot-1")
    assert arm(path, None) is None
    assert _holds_the_row(path)  # closed cleanly: kept
    arm(path, "boot-1")
    _replica_with_a_row(path)  # left open: whether the machine restarted since cannot be told
    assert arm(path, None) is None
    assert not path.exists() and not guard_file(path).exists()
