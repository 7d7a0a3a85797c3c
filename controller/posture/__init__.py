"""Posture-check rules, pure (no I/O, no Trio): range matching, body normalisation and check evaluation.

* :mod:`controller.posture.versions`: semver range statements of OS checks and reported OS versions;
* :mod:`controller.posture.normalize`: aliases, validation and the stored form of posture-check bodies;
* :mod:`controller.posture.evaluate`: one check against an identity's posture data and an API session's MFA state.
"""

from __future__ import annotations

from controller.posture.evaluate import (
    MFA_GRACE_SECONDS,
    CheckResult,
    DomainRecord,
    MacRecord,
    MfaState,
    OsRecord,
    PostureData,
    ProcessRecord,
    evaluate_check,
    failure_entry,
    mfa_deadline,
    mfa_timeout,
    mfa_timeout_remaining,
)
from controller.posture.normalize import (
    CHECK_TYPES,
    OS_TYPES,
    apply_aliases,
    canonical_mac,
    clean_hex,
    normalize_check,
)
from controller.posture.versions import reported_version, validate_range, version_matches

__all__ = [
    "CHECK_TYPES",
    "MFA_GRACE_SECONDS",
    "OS_TYPES",
    "CheckResult",
    "DomainRecord",
    "MacRecord",
    "MfaState",
    "OsRecord",
    "PostureData",
    "ProcessRecord",
    "apply_aliases",
    "canonical_mac",
    "clean_hex",
    "evaluate_check",
    "failure_entry",
    "mfa_deadline",
    "mfa_timeout",
    "mfa_timeout_remaining",
    "normalize_check",
    "reported_version",
    "validate_range",
    "version_matches",
]
