"""The one decision on a Dial/Bind session request: what the identity actor answers a request with
(``controller/posture/machine.py``) and what the access explanation shows (``controller.insight``), computed by the
same function from the same facts (the identity's plan, its posture data, the API session's MFA state, the instant).

The order is the reference controller's: the service must be visible to the identity, a policy of the requested
type must link them, one of those policies must pass its (enforced) posture checks, and an edge router must serve
both.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.posture.plan import ServiceAccess
from controller.posture.records import MfaState, PostureData

__all__ = ["GRANTED", "Decision", "decide"]

GRANTED = "GRANTED"


@dataclass(frozen=True, slots=True)
class Decision:
    """A request's outcome: ``code`` is :data:`GRANTED` or the error code the request is refused with
    (``NOT_FOUND``: no such service or none the identity may see; ``COULD_NOT_VALIDATE``: no policy of the type;
    ``INVALID_POSTURE``; ``NO_EDGE_ROUTERS_AVAILABLE``); ``policy_ids`` are the policies that pass (id order);
    ``verdicts`` each distinct check's verdict (``AccessPlan.evaluate``), when posture was evaluated."""

    code: str
    policy_ids: tuple[str, ...] = ()
    verdicts: list[int] | None = None

    @property
    def granted(self) -> bool:
        return self.code == GRANTED


_NOT_FOUND = Decision("NOT_FOUND")
_NO_POLICY = Decision("COULD_NOT_VALIDATE")


def decide(access: ServiceAccess | None, session_type: str, data: PostureData, mfa: MfaState | None, now: float, *,
           evaluate_posture: bool = True) -> Decision:
    """The decision on a request for ``session_type`` of the service ``access`` describes (None: the identity may
    not see it), at ``now``."""
    if access is None:
        return _NOT_FOUND
    plan = access.plans.get(session_type)
    if plan is None:
        return _NO_POLICY
    passing, _, verdicts = plan.evaluate(data, mfa, now, evaluate_posture=evaluate_posture)
    if not passing:
        return Decision("INVALID_POSTURE", (), verdicts)
    return Decision(GRANTED if access.routed else "NO_EDGE_ROUTERS_AVAILABLE", tuple(passing), verdicts)
