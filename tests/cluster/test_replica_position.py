"""What a replica holds, as the commit step keeps it (``controller/cluster/position.py``): plain data, no etcd."""

from __future__ import annotations

from controller.cluster.keys import NetworkKeys
from controller.cluster.position import ReplicaPosition

KEYS = NetworkKeys("/t/")
MAIN, MINE, THEIRS = KEYS.head, KEYS.lane("a"), KEYS.lane("b")
ROW, OTHER = KEYS.row("posture-state", "x"), KEYS.row("posture-state", "y")


def position(applied: int = 10, head: int = 10) -> ReplicaPosition:
    return ReplicaPosition(MAIN, MINE, applied, head)


def test_every_head_is_held_up_to_the_applied_revision() -> None:
    held = position(applied=10, head=8)
    assert held.holds({MAIN: 8, MINE: 10, THEIRS: 9})
    assert not held.holds({MAIN: 8, THEIRS: 11})
    assert not held.holds({MINE: 11})  # no lane write of this process yet: its chain counts once applied


def test_the_networks_chain_is_held_up_to_the_head_above_the_applied_revision() -> None:
    held = position(applied=10, head=14)
    assert held.holds({MAIN: 14, THEIRS: 10})
    assert not held.holds({MAIN: 15})
    assert not held.holds({MAIN: 14, THEIRS: 12})  # another node's lane write the watch has not brought


def test_own_lane_writes_count_above_the_applied_revision_once_the_chain_below_is_applied() -> None:
    held = position(applied=10, head=10)
    held.committed(lane=True, compared=7, revisions=[12], heads={MAIN: 10, MINE: 12, THEIRS: 11}, written=[[ROW]])
    assert held.lane_base == 7 and held.lane == 12 and held.lane_expected == 12
    assert held.applied == 10 and held.own == {12}  # b's write at 11 is not here yet
    assert held.holds({MAIN: 10, MINE: 12})
    assert not held.holds({MAIN: 10, MINE: 12, THEIRS: 11})
    # A chain started at 15 (its writes below not in this replica, or not known to be) counts only once applied.
    held.lane_base = 15
    assert not held.holds({MINE: 12})


def test_a_batch_whose_heads_are_all_held_moves_the_applied_revision() -> None:
    held = position(applied=10, head=10)
    held.committed(lane=False, compared=10, revisions=[11, 13], heads={MAIN: 13, THEIRS: 9}, written=[[ROW], [ROW]])
    assert held.head == 13 and held.applied == 13 and not held.own
    held.committed(lane=True, compared=0, revisions=[14], heads={MAIN: 13, MINE: 14, THEIRS: 9}, written=[[ROW]])
    assert held.applied == 14 and not held.own
    # Another node's lane moved past what was applied: the own write waits in ``own`` for the watch.
    held.committed(lane=True, compared=14, revisions=[16], heads={MAIN: 13, MINE: 16, THEIRS: 15}, written=[[ROW]])
    assert held.applied == 14 and held.own == {16}
    assert held.skips(16, moves_main=False) and not held.skips(15, moves_main=False)
    held.advanced(16)
    assert held.applied == 16 and not held.own


def test_the_watch_leaves_alone_what_the_replica_already_holds() -> None:
    held = position(applied=10, head=20)
    assert held.skips(9, moves_main=False) and held.skips(10, moves_main=True)
    assert held.skips(18, moves_main=True)  # the network's chain, committed here
    assert not held.skips(18, moves_main=False)  # a lane write of another node in between
    assert not held.skips(21, moves_main=True)


def test_a_lane_head_found_elsewhere_or_a_skipped_own_write_restarts_the_own_chain() -> None:
    held = position()
    held.committed(lane=True, compared=0, revisions=[11], heads={MAIN: 10, MINE: 11}, written=[[ROW]])
    assert held.lane_base == 0 and held.holds({MINE: 11})
    held.lane_moved(30)  # the lane head was found at 30: a fence, or this node's name used before
    assert held.lane_expected == 30 and not held.holds({MINE: 30})
    held.committed(lane=True, compared=30, revisions=[31], heads={MAIN: 10, MINE: 31}, written=[[ROW]])
    assert held.lane_base == 30 and not held.holds({MINE: 31})
    held.advanced(30)
    assert held.holds({MINE: 31})
    held.lane_skipped()  # a write of the lane that reached etcd and not this replica
    assert not held.holds({MINE: 31})


def test_a_rebuilt_replica_holds_what_it_was_read_at() -> None:
    held = position(applied=10, head=10)
    held.committed(lane=True, compared=0, revisions=[13], heads={MAIN: 10, MINE: 13, THEIRS: 12}, written=[[ROW]])
    held.rebuilt(12, 10)
    assert held.applied == 12 and not held.own and not held.holds({MINE: 13})
    # What another node must apply to hold what this one has seen acknowledged, but for the state this node's own
    # actors wrote (of identities the other node does not host).
    assert held.forwarded == 12


def test_keys_own_writes_above_the_applied_revision_wrote_are_not_taken_older_from_another_chain() -> None:
    held = position(applied=10, head=10)
    held.committed(lane=True, compared=0, revisions=[14, 16], heads={MAIN: 12, MINE: 16}, written=[[ROW], [OTHER]])
    assert held.own == {14, 16} and held.own_keys == {ROW: 14, OTHER: 16}
    assert held.shadows(ROW, 12) and held.shadows(ROW, 14) and not held.shadows(ROW, 15)
    assert held.shadows(OTHER, 15) and not held.shadows(KEYS.row("posture-state", "z"), 12)
    held.advanced(14)
    assert held.own_keys == {OTHER: 16}
    held.rebuilt(15, 12)
    assert not held.own_keys and not held.shadows(OTHER, 15)
    # A batch whose heads are all held records nothing: the applied revision covers it.
    held.committed(lane=False, compared=12, revisions=[17], heads={MAIN: 17, MINE: 15}, written=[[ROW]])
    assert held.applied == 17 and not held.own_keys
