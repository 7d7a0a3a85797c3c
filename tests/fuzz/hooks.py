"""Schemathesis hooks of ``make fuzz``: an administrator's ``zt-session`` on every operation that needs a session,
kept usable whatever the fuzzed requests do.

Loaded by the schemathesis processes ``run.py`` starts (``SCHEMATHESIS_HOOKS=tests.fuzz.hooks``), which describe the
controller in the ``TOLLGATE_FUZZ_HARNESS`` environment variable (:class:`tests.fuzz.harness.Harness`).

Sessions: the token is fetched by a password login of the default admin and reused; when an operation answers 401,
schemathesis logs in again and replays the request once (its reactive re-authentication), so a fuzzed logout, API
session deletion or anything else that ends the session costs one login.

The harness's credential: the controller refuses to delete or disable the default admin or to take its admin flag
away, but an administrator may legitimately delete or reset the default admin's password authenticator, switch
password login off in its auth policy, or move it to another policy, and fuzzed requests do all of that within
minutes, after which no login works and every later request tests nothing but 401. So requests that address the
default admin's password authenticator or auth policy by id go to a decoy row of the same kind made for the purpose
(same shape, same state), and a change of the default admin's auth policy goes to a decoy identity. The operations
are exercised all the same, on a row that nothing else depends on.

Created resources: schemathesis's ``ensure_resource_availability`` fails a 404 for a resource a scenario created,
unless a DELETE in that scenario addressed it by a path it recognises. Our deliberate behaviour defeats that
bookkeeping three ways: deletes cascade (an identity takes its authenticators, enrollments and sessions along),
routers are served under two collections (``/routers`` and ``/transit-routers``), and the other worker's scenarios
delete rows too. :func:`created_resource_stays_available` replaces it (``schemathesis.toml`` disables the
original): the same check, except that a 404 after any successful DELETE anywhere in between is explained. A create
whose row is missing with no delete since still fails.
"""

from __future__ import annotations

import threading
from typing import Any

import schemathesis
from schemathesis import APIOperation, AuthContext, CheckContext, HookContext, Response
from schemathesis import Case as GenericCase
from schemathesis.filters import HasAPIOperation
from schemathesis.openapi.checks import EnsureResourceAvailability
from schemathesis.specs.openapi.checks import ensure_resource_availability

from tests.fuzz.harness import Harness, log_in

__all__ = ["AdminSession", "after_call", "before_call", "created_resource_stays_available",
           "redirected_path_parameters"]

HARNESS = Harness.from_env()
# Reused for this long unless a 401 asks for a new one first; well within the controller's idle timeout.
_TOKEN_REUSE_SECONDS = 600
_WRITES = frozenset({"PUT", "PATCH"})
Case = GenericCase[APIOperation[Any, Any, Any, Any]]


def _needs_session(context: HasAPIOperation) -> bool:
    """Whether the operation declares the ``zt-session`` scheme (anonymous ones get no token: a 401 there, such as a
    wrong password at ``/authenticate``, is not about the harness's session and must not cost a login)."""
    return bool(context.operation.definition.raw.get("security"))


@schemathesis.auth(refresh_interval=_TOKEN_REUSE_SECONDS).apply_to(_needs_session)
class AdminSession:
    """The default admin's API session token in the ``zt-session`` header."""

    def get(self, case: Case, context: AuthContext) -> str:
        return log_in(HARNESS)

    def set(self, case: Case, data: str, context: AuthContext) -> None:
        case.headers["zt-session"] = data


def redirected_path_parameters(harness: Harness, method: str, path: str, path_parameters: dict[str, Any],
                               body: Any) -> dict[str, Any] | None:
    """The path parameters a request must use instead of ``path_parameters`` to spare the harness's credential, or
    None when it may go as generated.

    Args:
        harness: the rows to spare and their decoys.
        method: the request's method, upper case.
        path: the operation's path template, relative to the API's base path (``/authenticators/{id}``).
        path_parameters: the generated values.
        body: the generated body.
    """
    collection, _, rest = path.lstrip("/").partition("/")
    current = path_parameters.get("id")
    if not rest.startswith("{id}") or not isinstance(current, str):
        return None
    decoy = harness.redirects.get(collection, {}).get(current)
    if decoy is not None:
        return {**path_parameters, "id": decoy}
    if (collection == "identities" and rest == "{id}" and method in _WRITES and current == harness.admin_id
            and isinstance(body, dict) and body.get("authPolicyId") not in (None, "", harness.admin_policy_id)):
        return {**path_parameters, "id": harness.decoy_identity_id}
    return None


@schemathesis.hook
def before_call(context: HookContext, case: Case, kwargs: dict[str, Any]) -> None:
    """Send requests that would take the harness's credential away to the decoys (see the module docstring)."""
    replacement = redirected_path_parameters(HARNESS, case.method.upper(), case.operation.path, case.path_parameters,
                                             case.body)
    if replacement is not None:
        case.path_parameters = replacement


class _Deletions:
    """How many DELETEs have succeeded so far in this process, and how many had when each request was answered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._seen: dict[str, int] = {}

    def record(self, case_id: str, *, deleted: bool) -> None:
        with self._lock:
            self._count += deleted
            self._seen[case_id] = self._count

    def between(self, earlier_id: str, later_id: str) -> bool:
        """Whether a DELETE succeeded after the answer to ``earlier_id`` and by the answer to ``later_id``."""
        with self._lock:
            return self._seen.get(later_id, 0) > self._seen.get(earlier_id, self._count)


DELETIONS = _Deletions()


@schemathesis.hook
def after_call(context: HookContext, case: Case, response: Response) -> None:
    """Count the successful DELETEs, for :func:`created_resource_stays_available`."""
    DELETIONS.record(case.id, deleted=case.method.upper() == "DELETE" and 200 <= response.status_code < 300)


@schemathesis.check
def created_resource_stays_available(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """``ensure_resource_availability``, except for a 404 that a DELETE since the create explains (see the module
    docstring)."""
    try:
        result: bool | None = ensure_resource_availability(ctx, response, case)
    except EnsureResourceAvailability:
        parent = ctx.internals.find_parent(case_id=case.id)
        if parent is not None and DELETIONS.between(parent.id, case.id):
            return None
        raise
    return result
