"""One process at a time per LMDB environment.

The controller's writer keeps a write transaction open between commits (``controller/data/group_commit.py``), so a
second process writing the same environment would wait for LMDB's write lock forever. Instead it is refused at open,
with a clear error, by an exclusive ``flock`` on a file beside the data: the kernel drops the lock when the owning
process exits, however it exits, so a crash never leaves the directory claimed.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_NAME", "StoreInUse", "claim", "release"]

LOCK_NAME = "owner.lock"


class StoreInUse(RuntimeError):
    """Another open store (in this process or another) already owns the directory."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is in use by another controller (it holds {path / LOCK_NAME})")
        self.path = path


def claim(path: Path) -> int:
    """Take the directory ``path`` (which must exist) for this store; returns the descriptor to :func:`release`.

    Raises:
        StoreInUse: another open store holds it.
    """
    fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreInUse(path) from None
    return fd


def release(fd: int) -> None:
    os.close(fd)  # closing the only descriptor of the open file drops its flock
