"""A replica written without fsync, and the guard file that makes that safe.

A cluster node's replica holds nothing etcd does not: losing its last commits only costs catching up from the watch.
What must never happen is serving from a torn file. LMDB written without fsync stays whole through a crash of its
process (the kernel holds every page written) but not through a crash of the machine. So the replica commits
without fsync while a guard file beside it names the boot (``/proc/sys/kernel/random/boot_id``) it was opened in.
Found at start naming another boot, the machine went down with the replica open: the replica is discarded, and the
node rebuilds it from etcd as it does an empty one. A clean close flushes the replica's file and removes the guard.
Where the system names no boot, the replica stays synced (:func:`arm` gives None).

The guard is written and flushed before the replica is opened, and removed only after the replica's file is
flushed, so at every instant either the file on disk is whole or a guard naming its boot is.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BOOT_ID", "UnsyncedGuard", "arm", "current_boot"]

log = logging.getLogger("tollgate.cluster")

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
"""Where Linux names the current boot: a new value every time the machine starts."""


def current_boot(source: Path = BOOT_ID) -> str | None:
    """The current boot's id, or None where the system does not name it."""
    try:
        return source.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_durably(path: Path, text: str) -> None:
    staging = path.with_name(path.name + ".new")
    with staging.open("w", encoding="ascii") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(staging, path)
    _fsync_directory(path.parent)


@dataclass(frozen=True, slots=True)
class UnsyncedGuard:
    """The guard of the replica at ``store_path``, armed for boot ``boot``."""

    store_path: Path
    boot: str

    @property
    def file(self) -> Path:
        return guard_file(self.store_path)

    def disarm(self) -> None:
        """The replica was closed: flush its file, then remove the guard. Call after closing the store."""
        data = self.store_path / "data.mdb"
        if data.exists():
            descriptor = os.open(data, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            _fsync_directory(self.store_path)  # a rebuilt replica's file was renamed in
        self.file.unlink(missing_ok=True)
        _fsync_directory(self.store_path.parent)


def guard_file(store_path: Path) -> Path:
    """The guard of the replica at ``store_path``: a file beside its directory."""
    return store_path.with_name(store_path.name + ".unsynced")


def arm(store_path: Path, boot: str | None) -> UnsyncedGuard | None:
    """Prepare the replica at ``store_path`` to be written without fsync in boot ``boot``: discard it if a guard
    names another boot (the machine went down while it was open), then write the guard for ``boot``. When ``boot``
    is None the replica must stay synced: None, after discarding a replica any guard was left on (whether the
    machine restarted since cannot be told)."""
    guard = guard_file(store_path)
    store_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        armed_in: str | None = guard.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        armed_in = None
    if armed_in is not None and armed_in != boot:
        log.warning("the machine restarted while the replica was written without fsync: discarding it to rebuild "
                    "it from etcd", extra={"replica": str(store_path)})
        if store_path.exists():
            shutil.rmtree(store_path)  # a failure stops the start: a half-removed replica must not be served
        if boot is None:
            guard.unlink()
            _fsync_directory(store_path.parent)
    if boot is None:
        return None
    _write_durably(guard, boot)
    return UnsyncedGuard(store_path, boot)
