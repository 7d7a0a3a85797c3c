"""What an identity reported and when: posture records (and how a response folds into them, :func:`apply_response`),
MFA state per API session, and the MFA time rules.

All instants are **epoch seconds as floats** (``controller.clock.Clock.now()``), in the records and in the ``now``
arguments, so results never depend on the wall clock of the process computing them.

MFA boundaries (Tollgate's choice, so that the identity actor can revoke at an exact instant): a check whose MFA
passed at ``t`` with ``timeoutSeconds`` T fails from ``t + T`` inclusive, and a wake/unlock at ``e`` fails it from
``e + 300`` inclusive (:data:`MFA_GRACE_SECONDS`).

The records are frozen ``msgspec.Struct`` s: every actor step builds new ones, and a Struct is cheaper to build and
copy than a dataclass. They are untracked by the cyclic collector (``gc=False``): they hold only
scalars, tuples and mappings of reported data, never anything that could lead back to them, and a million parked
actors hold several each. They encode as arrays (``array_like``): the identity state is stored after every change,
and an array is smaller and quicker to write and read than a map of field names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec.structs import replace

from controller.check_types.bodies import canonical_mac, clean_hex

__all__ = [
    "MAX_PROCESSES",
    "MFA_GRACE_SECONDS",
    "DomainRecord",
    "MacRecord",
    "MfaState",
    "OsRecord",
    "PostureData",
    "ProcessRecord",
    "apply_response",
    "mfa_timeout",
    "mfa_timeout_remaining",
    "prompt_expired",
]

MFA_GRACE_SECONDS = 300
"""After a wake or unlock event (when the check prompts on it) MFA keeps passing this long."""


class OsRecord(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """The identity's last OS posture response. ``type`` as reported; it is compared case-insensitively.

    Every record keeps when it was reported (``last_updated_at``) and by which API session (``reported_by``, empty
    in records stored before it was kept)."""

    type: str
    version: str
    build: str | None = None
    last_updated_at: float | None = None
    posture_check_id: str = ""
    timed_out: bool = False
    reported_by: str = ""


class MacRecord(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """The identity's last MAC posture response: the reported addresses (normalised on receipt by the caller)."""

    addresses: tuple[str, ...]
    last_updated_at: float | None = None
    posture_check_id: str = ""
    timed_out: bool = False
    reported_by: str = ""


class DomainRecord(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """The identity's last DOMAIN posture response."""

    domain: str
    last_updated_at: float | None = None
    posture_check_id: str = ""
    timed_out: bool = False
    reported_by: str = ""


class ProcessRecord(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One PROCESS posture response (the client answers per check id, naming the binary's ``path``)."""

    path: str
    is_running: bool
    hash: str = ""
    signer_fingerprints: tuple[str, ...] = ()
    last_updated_at: float | None = None
    posture_check_id: str = ""
    timed_out: bool = False
    reported_by: str = ""


class PostureData(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """An identity's posture data, shared by all its API sessions.

    ``processes`` holds the last record submitted per posture-check id (PROCESS checks and the failure report of
    PROCESS_MULTI use it); ``process_paths`` the last record per exact, case-sensitive binary path, accumulated over
    all submissions (PROCESS_MULTI evaluation uses it). Treat the mappings as read-only.
    """

    os: OsRecord | None = None
    mac: MacRecord | None = None
    domain: DomainRecord | None = None
    processes: Mapping[str, ProcessRecord] = msgspec.field(default_factory=dict)
    process_paths: Mapping[str, ProcessRecord] = msgspec.field(default_factory=dict)


class MfaState(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """MFA state of one API session.

    ``passed_mfa_at`` is the last successful MFA of this API session (None: never, or MFA removed since);
    ``woken_at``/``unlocked_at`` the last wake/unlock the client reported; ``timed_out`` is sticky until the next
    successful MFA (set when an MFA check's timeout is found elapsed).
    """

    passed_mfa_at: float | None = None
    woken_at: float | None = None
    unlocked_at: float | None = None
    timed_out: bool = False


def mfa_timeout(check: Mapping[str, Any]) -> int:
    """The ``timeout`` reported in a client's MFA posture query: ``timeoutSeconds`` if > 0, else -1."""
    value = check.get("timeoutSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else -1


def prompt_expired(prompt: bool, event_at: float | None, passed_at: float, now: float) -> bool:
    """Whether a wake/unlock event has used up its grace period. An event before the last MFA is ignored."""
    return prompt and event_at is not None and event_at >= passed_at and now >= event_at + MFA_GRACE_SECONDS


def _elapsed(now: float, since: float) -> int:
    # Whole seconds, never negative (an event stamped a little ahead of `now` counts as just now).
    return max(0, math.floor(now - since))


def mfa_timeout_remaining(check: Mapping[str, Any], mfa: MfaState | None, now: float, *, legacy: bool = False) -> int:
    """The ``timeoutRemaining`` (whole seconds) reported in a client's MFA posture query, in this order:

    * -1 when the check has no timeout (``timeoutSeconds`` ≤ 0);
    * 0 when the API session has not passed MFA;
    * -1 when ``legacy`` (the caller decided the client SDK is a legacy one) and the check has
      ``ignoreLegacyEndpoints``;
    * otherwise ``max(0, T - floor(seconds since MFA))``, lowered to ``max(0, 300 - floor(seconds since event))``
      for a wake (when ``promptOnWake``) or unlock (when ``promptOnUnlock``) at or after the last MFA.
    """
    timeout = mfa_timeout(check)
    if timeout < 0:
        return -1
    if mfa is None or mfa.passed_mfa_at is None:
        return 0
    if legacy and check.get("ignoreLegacyEndpoints"):
        return -1
    passed = mfa.passed_mfa_at
    remaining = max(0, timeout - _elapsed(now, passed))
    for prompt, event_at in ((check.get("promptOnWake"), mfa.woken_at), (check.get("promptOnUnlock"), mfa.unlocked_at)):
        if prompt and event_at is not None and event_at >= passed:
            remaining = min(remaining, max(0, MFA_GRACE_SECONDS - _elapsed(now, event_at)))
    return remaining


MAX_PROCESSES = 64
"""PROCESS responses kept per identity (by check id, and by path)."""


# Posture responses, folded into the records -------------------------------------------------------------------


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _bounded(records: Mapping[str, ProcessRecord], key: str, record: ProcessRecord) -> dict[str, ProcessRecord]:
    """``records`` with ``key`` set, the oldest entries dropped beyond :data:`MAX_PROCESSES`."""
    out = {k: v for k, v in records.items() if k != key}
    while len(out) >= MAX_PROCESSES:
        del out[next(iter(out))]
    out[key] = record
    return out


def apply_response(posture: PostureData, response: Mapping[str, Any], now: float,
                   api_session_id: str = "") -> tuple[PostureData, bool]:
    """Fold one posture response (OS, MAC, DOMAIN or PROCESS, in wire names) of the API session ``api_session_id``
    into the identity's data; whether it reported anything a rule looks at differently from before (a report of
    the same values only renews their times and reporter, and cannot change a verdict). PROCESS data is kept for
    the :data:`MAX_PROCESSES` checks and paths reported last: an endpoint cannot grow its stored state without
    bound by reporting under made-up ids and paths."""
    check_id = str(response.get("id", ""))
    match response.get("typeId"):
        case "OS":
            record = OsRecord(str(response.get("type", "")), str(response.get("version", "")),
                              response.get("build"), now, check_id, reported_by=api_session_id)
            old = posture.os
            same = old is not None and (old.type, old.version, old.build) == (record.type, record.version,
                                                                             record.build)
            return replace(posture, os=record), not same
        case "MAC":
            addresses = tuple(canonical_mac(a) or a.lower() for a in _strings(response.get("macAddresses")))
            same = posture.mac is not None and posture.mac.addresses == addresses
            return replace(posture, mac=MacRecord(addresses, now, check_id, reported_by=api_session_id)), not same
        case "DOMAIN":
            domain = str(response.get("domain", ""))
            same = posture.domain is not None and posture.domain.domain == domain
            return replace(posture, domain=DomainRecord(domain, now, check_id, reported_by=api_session_id)), not same
        case "PROCESS":
            process = ProcessRecord(str(response.get("path") or ""), bool(response.get("isRunning")),
                                    clean_hex(str(response.get("hash") or "")),
                                    tuple(clean_hex(f) for f in _strings(response.get("signerFingerprints"))),
                                    now, check_id, reported_by=api_session_id)
            same = _same_process(posture.processes.get(check_id), process) and (
                not process.path or _same_process(posture.process_paths.get(process.path), process))
            processes = _bounded(posture.processes, check_id, process)
            paths = _bounded(posture.process_paths, process.path, process) if process.path else posture.process_paths
            return replace(posture, processes=processes, process_paths=paths), not same
    return posture, False


def _same_process(old: ProcessRecord | None, new: ProcessRecord) -> bool:
    return old is not None and (old.path, old.is_running, old.hash, old.signer_fingerprints) == (
        new.path, new.is_running, new.hash, new.signer_fingerprints)
