"""Signing the calls nodes send each other over the internal channel, as plain functions (no I/O, time passed in).

A call's header ``X-Tollgate-Forward: TIME:HMAC`` is HMAC-SHA256 over the time and the body, keyed by a key derived
from the network's enrolment-token key, which only the network's nodes hold (etcd gives it to them with the PKI).
A call whose signature does not verify, or whose time is more than :data:`SKEW` seconds off the receiver's clock, is
refused before anything of it is decoded.
"""

from __future__ import annotations

import hashlib
import hmac
import math

__all__ = ["SIGNATURE_HEADER", "SKEW", "forwarding_key", "signature", "verified"]

SIGNATURE_HEADER = "X-Tollgate-Forward"
SKEW = 30.0
"""Seconds a call's signed time may differ from the receiving node's clock."""


def forwarding_key(token_key: bytes) -> bytes:
    """The key that signs the calls, derived from the network's enrolment-token key."""
    return hashlib.sha256(b"tollgate internal forwarding\0" + token_key).digest()


def _digest(key: bytes, stamp: str, body: bytes) -> str:
    return hmac.new(key, stamp.encode() + b"\n" + body, hashlib.sha256).hexdigest()


def signature(key: bytes, body: bytes, now: float) -> str:
    """The :data:`SIGNATURE_HEADER` value of a call with ``body`` sent at ``now`` (Unix time)."""
    stamp = repr(now)
    return f"{stamp}:{_digest(key, stamp, body)}"


def verified(key: bytes, header: str | None, body: bytes, now: float) -> bool:
    """Whether ``header`` signs ``body`` with ``key`` at a time within :data:`SKEW` of ``now`` (Unix time)."""
    if not header or ":" not in header:
        return False
    stamp, _, digest = header.rpartition(":")
    try:
        sent = float(stamp)
    except ValueError:
        return False
    if not math.isfinite(sent) or abs(now - sent) > SKEW:
        return False
    return hmac.compare_digest(digest, _digest(key, stamp, body))
