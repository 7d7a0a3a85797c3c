"""Who wants to know when an identity's posture state changes: readers that show it live (the console's pages) say
so for as long as they show it, and each committed write of the identity's state calls them back.

While nothing is watched a writer skips the call altogether (:attr:`StateWatchers.watching`); otherwise calling back
costs the writer's task one dict lookup per identity written, and a call per watcher of that identity. A callback
must not block (it wakes its reader, which reads the state itself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["StateWatchers"]


class StateWatchers:
    """Callbacks per identity, called after each durable write of the identity's posture state."""

    __slots__ = ("_by_identity", "watching")

    def __init__(self) -> None:
        self._by_identity: dict[str, list[Callable[[], None]]] = {}
        self.watching = False
        """Whether any identity is watched now: while not, a writer need not call :meth:`committed`."""

    @contextmanager
    def watch(self, identity_id: str, changed: Callable[[], None]) -> Iterator[None]:
        """Call ``changed`` (on the writer's task) after each committed write of ``identity_id``'s state, until the
        block ends."""
        callbacks = self._by_identity.setdefault(identity_id, [])
        callbacks.append(changed)
        self.watching = True
        try:
            yield
        finally:
            callbacks.remove(changed)
            if not callbacks:
                del self._by_identity[identity_id]
                self.watching = bool(self._by_identity)

    def committed(self, identity_id: str) -> None:
        """The state of ``identity_id`` was written, durably."""
        callbacks = self._by_identity.get(identity_id)
        if callbacks:
            for changed in list(callbacks):
                changed()
