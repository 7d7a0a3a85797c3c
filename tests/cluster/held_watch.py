"""Keeping an in-process cluster node's replica from hearing of what etcd sends, for as long as a test needs."""

from __future__ import annotations

from typing import Any

from controller.cluster import LocalReplica
from controller.runtime.composition import Controller

__all__ = ["HeldWatch", "local_of"]


def local_of(controller: Controller) -> LocalReplica:
    """The node's replica."""
    assert controller.cluster is not None and controller.cluster.local is not None
    return controller.cluster.local


class HeldWatch:
    """From its creation, the updates of ``controller``'s replica watch are kept here, not applied, until
    :meth:`release` hands them over (``drop``: they are thrown away, and so is everything after)."""

    def __init__(self, controller: Controller, *, drop: bool = False) -> None:
        self._local = local_of(controller)
        self._hand_over = self._local.enqueue
        self.held: list[Any] = []
        self._local.enqueue = (lambda update: None) if drop else self.held.append  # type: ignore[method-assign]

    def release(self) -> None:
        self._local.enqueue = self._hand_over  # type: ignore[method-assign]
        for update in self.held:
            self._hand_over(update)
