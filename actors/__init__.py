"""Actors on Trio, with no knowledge of what they model: a lean mailbox (``mailbox``), the registry that spawns an
actor on its first message, parks it when idle and restarts it after a crash (``live_actors``), the one heap every
actor's deadline shares (``scheduler``), and how late deadline decisions are (``lateness``).

It imports Trio only, never Quart, the store or the controller; the posture engine
(``controller/posture/engine.py``) gives it its behaviour.
"""
