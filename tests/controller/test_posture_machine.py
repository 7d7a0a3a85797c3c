"""The identity actor's pure state machine (:func:`controller.posture.machine.step`): no Trio, no store, exact
values. Plans are built by hand from compiled rules. The stored form of its state: test_posture_stored_state.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from actors.live_actors import OneShot
from controller.clock import format_time
from controller.errors import ApiError
from controller.posture.machine import (
    MAX_API_SESSIONS,
    MAX_FAILURES,
    Grant,
    SessionRef,
    Transition,
    step,
)
from controller.posture.messages import (
    ADOPTED,
    ApiSessionEnded,
    ApiSessionStarted,
    CreateSession,
    DeadlineReached,
    MfaPassed,
    MfaRemoved,
    PostureReported,
    ReadState,
    Reevaluate,
    Settle,
)
from controller.posture.plan import AccessPlan, IdentityPlan, Prompt, ServiceAccess
from controller.posture.records import MAX_PROCESSES, MFA_GRACE_SECONDS, MfaState
from controller.posture.rules import MfaRule, Rule, compile_rule
from controller.posture.state import IdentityState, SessionPosture, encode_state

T0 = 1_700_000_000.0
MAC = {"id": "mac", "name": "mac", "typeId": "MAC", "macAddresses": ["aa-bb-cc-dd-ee-ff"]}
MFA = {"id": "mfa", "name": "mfa", "typeId": "MFA", "timeoutSeconds": 600, "promptOnWake": True,
       "promptOnUnlock": False}
MAC_RULE = compile_rule(MAC)
MFA_RULE = compile_rule(MFA)
GOOD_MAC = {"id": "mac", "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF"]}
BAD_MAC = {"id": "mac", "typeId": "MAC", "macAddresses": ["11:22:33:44:55:66"]}


def access(**policies: Sequence[Rule]) -> AccessPlan:
    """An access plan of the policies named by the keywords, each with its rules."""
    return AccessPlan(tuple({"id": name, "name": f"policy {name}"} for name in policies),
                      tuple(tuple(rules) for rules in policies.values()))


def service(service_id: str, *, routed: bool = True, **plans: AccessPlan) -> ServiceAccess:
    return ServiceAccess(service_id, f"{service_id} name", plans, routed)


def plan(*services: ServiceAccess, digest: str = "digest-1",
         prompts: tuple[tuple[str, str, tuple[Prompt, ...]], ...] = ()) -> IdentityPlan:
    """A plan giving ``services``; its MFA rules are those of its services' policies."""
    mfa = {id(rule): rule for s in services for p in s.plans.values() for rule in p.rules if isinstance(rule, MfaRule)}
    return IdentityPlan(None, frozenset(), frozenset(), False, digest, tuple(mfa.values()), prompts,
                        {s.service_id: s for s in services})


# The mac service needs the MAC check, the mfa service the MFA check (Dial only).
NETWORK = plan(service("mac-svc", Dial=access(p_mac=[MAC_RULE])), service("mfa-svc", Dial=access(p_mfa=[MFA_RULE])))


def run(state: IdentityState, *messages: Any, now: float, sessions: Sequence[SessionRef] = (),
        identity_plan: IdentityPlan | None = NETWORK, evaluate_posture: bool = True) -> Transition:
    return step(state, sessions, identity_plan, messages, now, evaluate_posture=evaluate_posture)


def replies(t: Transition) -> dict[int, Any]:
    """The step's answers, by the identity of their reply slot."""
    return {id(reply): value for reply, value in t.replies}


def request(api_session: str, service_id: str, session_type: str = "Dial") -> CreateSession:
    return CreateSession(api_session, service_id, session_type, {"k": "v"}, OneShot())


# Posture, MFA and endpoint state -----------------------------------------------------------------------------------


def test_posture_responses_update_records_as_received() -> None:
    state = IdentityState("i1")
    responses: tuple[dict[str, Any], ...] = (
        {"id": "c1", "typeId": "OS", "type": "Windows", "version": "10.0.19045", "build": "19045"},
        {"id": "c2", "typeId": "MAC", "macAddresses": ["AA:BB:CC:DD:EE:FF", "not-a-mac"]},
        {"id": "c3", "typeId": "DOMAIN", "domain": "corp.example"},
        {"id": "c4", "typeId": "PROCESS", "path": "/bin/agent", "isRunning": True, "hash": "AB:CD",
         "signerFingerprints": ["FF"]},
    )
    reply: OneShot[Any] = OneShot()
    t = run(state, PostureReported("s1", responses, reply), now=100.0)
    new = t.state
    assert t.persist and not t.durable
    assert new.posture.os is not None and new.posture.os.version == "10.0.19045"
    assert new.posture.os.last_updated_at == 100.0 and new.posture.os.posture_check_id == "c1"
    assert new.posture.mac is not None and new.posture.mac.addresses == ("aa-bb-cc-dd-ee-ff", "not-a-mac")
    assert new.posture.domain is not None and new.posture.domain.domain == "corp.example"
    assert new.posture.processes["c4"].hash == "abcd"
    assert new.posture.process_paths["/bin/agent"].signer_fingerprints == ("ff",)
    assert new.last_change_at == 100.0
    assert replies(t) == {id(reply): []}  # no wake or unlock: no MFA timer started
    assert state.posture.os is None  # the old state is untouched


def test_a_report_of_the_same_values_renews_their_times_without_a_recheck() -> None:
    sessions = [SessionRef("d1", "s1", "mac-svc", "Dial")]
    first = run(IdentityState("i1"), PostureReported("s1", (BAD_MAC,)), now=T0, sessions=sessions)
    assert first.revoke == ["d1"]
    # The session is still there (as if granted on other grounds): no verdict can change, so nothing is re-checked.
    again = run(first.state, PostureReported("s1", ({**BAD_MAC, "macAddresses": ["11-22-33-44-55-66"]},)),
                now=T0 + 5, sessions=sessions)
    assert again.revoke == [] and again.persist
    assert again.state.posture.mac is not None and again.state.posture.mac.last_updated_at == T0 + 5
    assert again.state.last_change_at == T0 + 5
    changed = run(first.state, PostureReported("s1", (GOOD_MAC,)), now=T0 + 5, sessions=sessions)
    assert changed.revoke == [] and changed.state.deadline is None
    assert run(changed.state, PostureReported("s1", (BAD_MAC,)), now=T0 + 6, sessions=sessions).revoke == ["d1"]


def test_mfa_and_endpoint_state_are_per_api_session() -> None:
    t = run(IdentityState("i1"), ApiSessionStarted("s1"), now=1.0)
    assert t.state.sessions["s1"] == SessionPosture() and t.persist
    t = run(t.state, MfaPassed("s1"), now=10.0)
    assert t.persist and t.state.sessions["s1"].mfa.passed_mfa_at == 10.0 and t.state.last_change_at == 10.0
    t = run(t.state, PostureReported("s1", (), woken=True, unlocked=False), now=20.0)
    assert t.state.sessions["s1"].mfa.woken_at == 20.0
    assert t.state.sessions["s1"].mfa.unlocked_at is None
    t = run(t.state, PostureReported("s1", (), woken=False, unlocked=True), now=30.0)
    assert t.state.sessions["s1"].mfa.woken_at == 20.0  # a false flag never clears
    assert t.state.sessions["s1"].mfa.unlocked_at == 30.0
    t = run(t.state, MfaPassed("s2"), now=40.0)
    assert t.state.sessions["s1"].mfa.passed_mfa_at == 10.0 and t.state.sessions["s2"].mfa.passed_mfa_at == 40.0
    t = run(t.state, MfaRemoved(), now=50.0)
    assert all(s.mfa.passed_mfa_at is None for s in t.state.sessions.values())
    assert t.state.sessions["s1"].mfa.woken_at == 20.0  # only the passes go
    assert t.clear_pending and t.persist and t.state.last_change_at == 50.0
    t = run(t.state, ApiSessionEnded("s1"), now=60.0)
    assert "s1" not in t.state.sessions and t.persist
    ended = run(t.state, ApiSessionEnded("gone"), now=61.0)
    assert ended.state == t.state and not ended.persist


def test_mfa_passed_clears_the_sticky_timeout() -> None:
    timed_out = IdentityState("i1", sessions={"s1": SessionPosture(MfaState(10.0, 5.0, None, True))})
    t = run(timed_out, MfaPassed("s1"), now=20.0)
    assert t.state.sessions["s1"].mfa == MfaState(20.0, 5.0, None, False)


def test_a_wake_or_unlock_reports_the_services_whose_mfa_timer_it_starts() -> None:
    prompts = (("svc-a", "A", (Prompt(on_wake=True, on_unlock=False, timeout=-1),)),
               ("svc-b", "B", (Prompt(on_wake=False, on_unlock=True, timeout=-1),
                               Prompt(on_wake=False, on_unlock=True, timeout=900))),
               ("svc-c", "C", (Prompt(on_wake=True, on_unlock=True, timeout=600),)))
    identity_plan = plan(prompts=prompts)
    passed = IdentityState("i1", sessions={"s1": SessionPosture(MfaState(passed_mfa_at=T0))})

    def started(state: IdentityState, now: float, *, woken: bool = False, unlocked: bool = False) -> list[str]:
        reply: OneShot[Any] = OneShot()
        t = run(state, PostureReported("s1", (), reply, woken, unlocked), now=now, identity_plan=identity_plan)
        changes = replies(t)[id(reply)]
        assert all(c["postureQueryType"] == "MFA" and c["timeoutRemaining"] == MFA_GRACE_SECONDS for c in changes)
        return [f"{c['id']}:{c['timeout']}" for c in changes]

    # svc-c's own timeout (600 s after the MFA) ends before a grace starting at T0 + 299 would.
    assert started(passed, T0 + 299, woken=True) == ["svc-a:-1", "svc-c:600"]
    assert started(passed, T0 + 300, woken=True) == ["svc-a:-1"]
    assert started(passed, T0 + 100, unlocked=True) == ["svc-b:-1", "svc-c:600"]  # the first prompting check
    assert started(passed, T0 + 100) == []
    # Before any MFA there is no timer to start.
    assert started(IdentityState("i1"), T0, woken=True, unlocked=True) == []


# Deadlines and re-checks ---------------------------------------------------------------------------------------


def test_an_mfa_timeout_arms_a_deadline_that_revokes_and_marks_the_session() -> None:
    sessions = [SessionRef("dial-mfa", "s1", "mfa-svc", "Dial"), SessionRef("dial-mac", "s2", "mac-svc", "Dial")]
    start = IdentityState("i1", posture=run(IdentityState("i1"), PostureReported("s2", (GOOD_MAC,)),
                                            now=T0).state.posture)
    t = run(start, MfaPassed("s1"), now=T0, sessions=sessions)
    assert t.state.deadline == T0 + 600 and t.persist and t.revoke == [] and t.decided == []
    state = t.state
    # Any earlier re-check keeps the deadline.
    early = run(state, Reevaluate(), now=T0 + 599.999, sessions=sessions)
    assert early.revoke == [] and early.state.deadline == T0 + 600 and early.decided == []
    t = run(state, DeadlineReached(T0 + 600), now=T0 + 600, sessions=sessions)
    assert t.revoke == ["dial-mfa"] and t.durable
    assert t.decided == [T0 + 600]
    assert t.state.sessions["s1"].mfa.timed_out
    assert t.state.deadline is None and t.state.last_change_at == T0 + 600 and t.persist


def test_a_message_just_after_the_deadline_decides_it_first() -> None:
    sessions = [SessionRef("dial-mfa", "s1", "mfa-svc", "Dial")]
    state = run(IdentityState("i1"), MfaPassed("s1"), now=T0, sessions=sessions).state
    t = run(state, PostureReported("s1", (GOOD_MAC,)), now=T0 + 600.5, sessions=sessions)
    assert t.decided == [T0 + 600] and t.revoke == ["dial-mfa"]
    # The deadline's own message, arriving next, finds nothing left to decide.
    later = run(t.state, DeadlineReached(T0 + 600), now=T0 + 600.6, sessions=())
    assert later.decided == [] and later.revoke == []


def test_the_next_deadline_is_the_earliest_failure_of_a_passing_mfa_check() -> None:
    state = IdentityState("i1", sessions={
        "s1": SessionPosture(MfaState(passed_mfa_at=T0)),
        "s2": SessionPosture(MfaState(passed_mfa_at=T0 + 50, woken_at=T0 + 60)),  # promptOnWake: grace to +360
        "s3": SessionPosture(MfaState(passed_mfa_at=T0 - 10, timed_out=True)),  # already failing
        "s4": SessionPosture(MfaState()),  # never passed
    })
    assert run(state, Reevaluate(), now=T0 + 1).state.deadline == T0 + 360
    assert run(state, Reevaluate(), now=T0 + 360).state.deadline == T0 + 600
    assert run(state, Reevaluate(), now=T0 + 650).state.deadline is None
    # An identity whose plan holds no MFA check has no deadline.
    assert run(state, Reevaluate(), now=T0 + 1, identity_plan=plan()).state.deadline is None


def test_a_recheck_revokes_what_no_policy_passes_any_more() -> None:
    sessions = [SessionRef("d1", "s1", "mac-svc", "Dial"), SessionRef("d2", "s1", "gone-svc", "Dial"),
                SessionRef("b1", "s1", "mac-svc", "Bind")]
    state = run(IdentityState("i1"), PostureReported("s1", (GOOD_MAC,)), now=T0).state
    # A service the plan no longer gives, and a session type no policy grants, go at the next re-check.
    t = run(state, Reevaluate(), now=T0 + 1, sessions=sessions)
    assert t.revoke == ["d2", "b1"] and t.state.last_change_at == T0 + 1
    t = run(state, PostureReported("s1", (BAD_MAC,)), now=T0 + 2, sessions=sessions[:1])
    assert t.revoke == ["d1"] and t.durable
    # With posture evaluation off, only policies count.
    off = run(state, PostureReported("s1", (BAD_MAC,)), now=T0 + 2, sessions=sessions, evaluate_posture=False)
    assert off.revoke == ["d2", "b1"]


def test_the_access_digest_is_recorded_and_a_change_is_a_change_of_the_identity() -> None:
    t = run(IdentityState("i1", last_change_at=5.0), ApiSessionStarted("s1"), now=10.0)
    assert t.state.access_digest == "digest-1" and t.state.last_change_at == 5.0  # the baseline, not a change
    same = run(t.state, Reevaluate(), now=20.0)
    assert same.state == t.state and not same.persist and not same.durable
    changed = run(t.state, Reevaluate(), now=30.0, identity_plan=plan(digest="digest-2"))
    assert changed.state.access_digest == "digest-2" and changed.state.last_change_at == 30.0 and changed.persist
    # Only an API session start or a Reevaluate looks at access; other re-checks record a missing digest only.
    posture = run(t.state, PostureReported("s1", ()), now=40.0, identity_plan=plan(digest="digest-3"))
    assert posture.state.access_digest == "digest-1"


# Session requests ----------------------------------------------------------------------------------------------


def test_a_session_request_passing_posture_is_granted() -> None:
    state = run(IdentityState("i1"), PostureReported("s1", (GOOD_MAC,)), now=T0).state
    first, again = request("s1", "mac-svc"), request("s1", "mac-svc")
    t = run(state, first, again, now=T0 + 1)
    # One grant for both requests of the same API session, service and type; created by the shell (its event is
    # the session's creation).
    assert t.grants == [Grant(first, ["p_mac"], [first.reply, again.reply])]
    assert t.durable and t.replies == [] and t.revoke == []


def test_a_request_for_a_session_the_api_session_has_gets_it() -> None:
    sessions = [SessionRef("d1", "s1", "mac-svc", "Dial")]
    asked = request("s1", "mac-svc")
    t = run(IdentityState("i1"), asked, now=T0, sessions=sessions)
    assert t.existing == [(asked.reply, "d1")] and t.grants == [] and t.replies == []


@pytest.mark.parametrize(("identity_plan", "service_id", "session_type", "code"), [
    (NETWORK, "nowhere", "Dial", "NOT_FOUND"),
    (NETWORK, "mac-svc", "Bind", "COULD_NOT_VALIDATE"),
    (plan(service("mac-svc", routed=False, Dial=access(p=[]))), "mac-svc", "Dial", "NO_EDGE_ROUTERS_AVAILABLE"),
])
def test_refusals_before_and_after_posture(identity_plan: IdentityPlan, service_id: str, session_type: str,
                                           code: str) -> None:
    asked = request("s1", service_id, session_type)
    t = run(IdentityState("i1"), asked, now=T0, identity_plan=identity_plan)
    [answer] = replies(t).values()
    assert isinstance(answer, ApiError) and answer.code == code
    assert t.grants == [] and t.state.failures == ()


def test_a_posture_refusal_is_recorded_with_its_failing_checks() -> None:
    # Woken 10 s after the MFA, with the check prompting on a wake: the grace has run out at T0 + 310.
    state = IdentityState("i1", sessions={"s1": SessionPosture(MfaState(passed_mfa_at=T0, woken_at=T0 + 10))})
    both = plan(service("svc", Dial=access(p_mac=[MAC_RULE], p_mfa=[MFA_RULE])))
    asked = request("s1", "svc")
    now = T0 + 10 + MFA_GRACE_SECONDS
    t = run(state, asked, now=now, identity_plan=both)
    [answer] = replies(t).values()
    assert isinstance(answer, ApiError) and answer.code == "INVALID_POSTURE"
    assert answer.cause == {
        "message": "Failed to pass posture checks for service policies: [p_mac p_mfa]",
        "data": {"p_mac": [{"id": "mac", "typeId": "MAC", "isPassing": False}],
                 "p_mfa": [{"id": "mfa", "typeId": "MFA", "isPassing": False}]},
    }
    assert t.persist and not t.durable and t.grants == []
    [failure] = t.state.failures
    assert failure == {
        "when": format_time(now), "serviceId": "svc", "serviceName": "svc name", "apiSessionId": "s1",
        "sessionType": "Dial",
        "policyFailures": [
            {"policyId": "p_mac", "policyName": "policy p_mac", "checks": [{
                "postureCheckId": "mac", "postureCheckName": "mac", "postureCheckType": "MAC", "actualValue": [],
                "expectedValue": ["aa-bb-cc-dd-ee-ff"]}]},
            {"policyId": "p_mfa", "policyName": "policy p_mfa", "checks": [{
                "postureCheckId": "mfa", "postureCheckName": "mfa", "postureCheckType": "MFA",
                "actualValue": {"passedMfa": True, "passedOnWake": False, "passedOnUnlock": True, "timedOut": False},
                "expectedValue": {"passedMfa": True, "passedOnWake": True, "passedOnUnlock": False,
                                  "timedOut": False},
                # The MFA instants formatted for the wire.
                "criteria": {"passedMfaAt": format_time(T0), "wokenAt": format_time(T0 + 10), "unlockedAt": None,
                             "timeoutSeconds": 600, "timeoutRemainingSeconds": 0}}]},
        ],
    }
    # One passing policy is enough: before the grace ran out, p_mfa grants the session.
    granted = run(state, request("s1", "svc"), now=T0 + 20, identity_plan=both)
    assert [g.policy_ids for g in granted.grants] == [["p_mfa"]] and granted.state.failures == ()


def test_failures_keep_the_last_fifty() -> None:
    requests = [request(f"s{n}", "mac-svc") for n in range(MAX_FAILURES + 7)]
    t = run(IdentityState("i1"), *requests[:30], now=T0)
    t = run(t.state, *requests[30:], now=T0 + 1)
    assert len(t.state.failures) == MAX_FAILURES
    assert t.state.failures[0]["apiSessionId"] == "s7"
    assert t.state.failures[-1]["apiSessionId"] == f"s{MAX_FAILURES + 6}"


def test_the_stored_state_is_bounded_whatever_an_endpoint_reports() -> None:
    """Made-up check ids, paths and API sessions cannot grow an identity's state past its bounds: the oldest
    entries go (an API session forgotten loses its MFA pass)."""
    extra = 40
    processes = [{"id": f"p{n}", "typeId": "PROCESS", "path": f"/bin/p{n}", "isRunning": True}
                 for n in range(MAX_PROCESSES + extra)]
    logins = [MfaPassed(f"s{n}") for n in range(MAX_API_SESSIONS + extra)]
    t = run(IdentityState("i1"), PostureReported("s0", tuple(processes), None), *logins, now=T0)
    posture = t.state.posture
    assert sorted(posture.processes) == sorted(f"p{n}" for n in range(extra, MAX_PROCESSES + extra))
    assert sorted(posture.process_paths) == sorted(f"/bin/p{n}" for n in range(extra, MAX_PROCESSES + extra))
    assert list(t.state.sessions) == [f"s{n}" for n in range(extra, MAX_API_SESSIONS + extra)]
    assert all(s.mfa.passed_mfa_at == T0 for s in t.state.sessions.values())
    # Whatever the history, the stored form stays within what these bounds allow.
    requests = [request(f"s{n}", "mac-svc") for n in range(MAX_FAILURES + extra)]
    full = run(t.state, *requests, now=T0 + 1).state
    assert len(full.failures) == MAX_FAILURES
    assert len(encode_state(full)) < 256 * 1024


# Reads, barriers, unknown messages and a gone identity -------------------------------------------------------


def test_reads_and_barriers() -> None:
    read: OneShot[Any] = OneShot()
    settle: OneShot[Any] = OneShot()
    t = run(IdentityState("i1"), MfaPassed("s1"), ReadState(read), Settle(settle), now=T0)
    [(answered, value)] = t.replies
    assert answered is read
    assert value.sessions["s1"].mfa.passed_mfa_at == T0  # earlier messages of the step are handled
    assert t.settles == [settle]
    nothing = run(IdentityState("i1"), Settle(settle), now=T0)
    assert nothing.state == IdentityState("i1") and not nothing.persist
    with pytest.raises(TypeError):
        run(IdentityState("i1"), object(), now=T0)


def test_a_gone_identity_drops_its_state_and_answers_every_request() -> None:
    create, read, settle = request("s1", "mac-svc"), ReadState(OneShot()), Settle(OneShot())
    posture = PostureReported("s1", (GOOD_MAC,), OneShot())
    state = IdentityState("i1", sessions={"s1": SessionPosture(MfaState(passed_mfa_at=T0))}, deadline=T0 + 600)
    t = run(state, create, read, posture, MfaPassed("s1"), settle, now=T0 + 1, identity_plan=None)
    assert t.gone and t.state == IdentityState("i1")
    answers = replies(t)
    assert isinstance(answers[id(create.reply)], ApiError) and answers[id(create.reply)].code == "UNAUTHORIZED"
    assert isinstance(answers[id(read.reply)], ApiError) and answers[id(read.reply)].code == "NOT_FOUND"
    assert posture.reply is not None and answers[id(posture.reply)] == []
    assert t.settles == [settle.reply]


def test_a_change_named_in_the_same_step_wins_over_an_adoption_re_check() -> None:
    """An adopted identity's re-check and a policy or role change drained in one step: a session no policy grants
    is revoked for the change, whichever came first; alone, the adoption names itself."""
    state = run(IdentityState("i1"), PostureReported("s1", (GOOD_MAC,)), now=T0).state
    gone = [SessionRef("d2", "s1", "gone-svc", "Dial")]
    for messages, reason in (((Reevaluate(ADOPTED), Reevaluate("roleChange")), "roleChange"),
                             ((Reevaluate("roleChange"), Reevaluate(ADOPTED)), "roleChange"),
                             ((Reevaluate(ADOPTED),), ADOPTED)):
        t = run(state, *messages, now=T0 + 1, sessions=gone)
        assert t.revoke == ["d2"]
        assert [detail[:2] for detail in t.revoke_details] == [("noPolicy", reason)]
