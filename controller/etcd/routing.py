"""Which member the requests that need the leader go to: the leader itself, when one of the client's endpoints is it.

A follower hands every write, and the ReadIndex of every linearizable read, to its leader and waits for the leader's
answer: one more hop between members, and more work for the cluster than the leader answering directly. So the
client finds which of its endpoints leads (each member's status names the leader, and the member that answers is
named in every answer's header) and sends there.

:class:`LeaderRoute` is the plain state of that choice: the highest raft term seen in any answer, and what the last
choice was made for (that term and the member requests went to then). A choice is due again when either changes:
an election happened (every answer carries its term), or the transport moved on from a member that failed. Where no
endpoint is the leader (no leader now, or the endpoints are proxies), requests stay where the transport has them.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.etcd.model import Header, MemberStatus

__all__ = ["ROUTE_WITHIN", "LeaderRoute"]

ROUTE_WITHIN = 0.25
"""Seconds the client waits for one member's status while it finds the leader; past it, it asks the next (a member
that does not answer its status in time is not the one to send requests to)."""


@dataclass(slots=True)
class LeaderRoute:
    """The leader-first choice of one client (see the module's docstring)."""

    term: int = 0
    """The highest raft term seen in an answer."""
    chosen_for: tuple[int, str] | None = None
    """The term and the member requests went to when the route was last chosen."""
    choosing: bool = False
    """A request is finding the leader now: the others go where the transport has them meanwhile."""

    def saw(self, header: Header) -> None:
        """An answer's header: a later term than any seen means an election happened."""
        if header.raft_term > self.term:
            self.term = header.raft_term

    def due(self, current: str) -> bool:
        """Whether the leader is to be found again before a request to ``current`` (where requests go now)."""
        return not self.choosing and self.chosen_for != (self.term, current)

    def leads(self, status: MemberStatus, leader: int) -> tuple[bool, int]:
        """Whether the member that answered ``status`` leads, given the leader named so far (0: none yet); and the
        leader named from now on."""
        self.saw(status.header)
        named = leader or status.leader
        return named != 0 and status.header.member_id == named, named

    def chosen(self, current: str) -> None:
        """The route was chosen: requests go to ``current`` until the term or the member changes."""
        self.chosen_for = (self.term, current)
        self.choosing = False
