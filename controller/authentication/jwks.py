"""Signing keys of external JWT signers, fetched from their JWKS endpoints and kept per endpoint URL.

A key set is fetched inside the request that needs it, bounded by a timeout: nothing polls and nothing runs in the
background. A set is fetched again when

* a token names a ``kid`` the set does not hold (the identity provider may have rotated its keys), or
* the set is older than ``max_age`` (so a key the provider withdrew stops verifying tokens),

but never more than once per ``min_refetch_interval`` per endpoint, whether the previous attempt succeeded or failed:
a flood of tokens with made-up kids, or an identity provider that is down, costs at most one fetch per interval.
Requests that need the same endpoint while it is being fetched wait for that one fetch and share its outcome.

TLS is verified. The trusted roots are the ``verify`` context when one is given (tests, or an operator's private CA
set programmatically), otherwise httpx's defaults honouring the ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` environment
variables, as proxies come from ``HTTPS_PROXY`` / ``NO_PROXY``. A redirect is a failed fetch.

Only RSA keys and EC keys on P-256, P-384 or P-521 meant for signatures are kept; symmetric (``oct``) keys, private
keys and keys marked ``"use": "enc"`` are ignored, so an HMAC secret published by mistake can never verify a token.
"""

from __future__ import annotations

import json
import ssl
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
import trio
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MIN_REFETCH_INTERVAL",
    "DEFAULT_TIMEOUT",
    "MAX_KEY_SET_BYTES",
    "JsonWebKey",
    "JwksCache",
    "JwksError",
    "PublicKey",
]

#: Seconds one fetch may take in all (connect, TLS, response), after which it fails.
DEFAULT_TIMEOUT = 5.0
#: Seconds between two fetches of one endpoint, at least.
DEFAULT_MIN_REFETCH_INTERVAL = 30.0
#: Seconds a fetched key set is trusted before the next request that needs it fetches it again.
DEFAULT_MAX_AGE = 600.0
#: Endpoints whose key sets are kept; signers bound the number in practice, this bounds it in any case.
DEFAULT_MAX_ENDPOINTS = 256
#: A key set response larger than this is refused: real ones hold a handful of keys, a few kilobytes.
MAX_KEY_SET_BYTES = 1 << 20

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey

_CURVES = frozenset({"P-256", "P-384", "P-521"})


class JwksError(Exception):
    """A key set could not be fetched, or holds no key for the token; the login that needed it fails.

    Attributes:
        reason: What went wrong, for the log (never for the client).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class JsonWebKey:
    """One public signing key of a key set.

    Attributes:
        kid: The key's ``kid``, or None when it has none.
        key: The public key.
        algorithm: The key's ``alg`` when it declares one (a token must then use that algorithm), else None.
    """

    kid: str | None
    key: PublicKey
    algorithm: str | None


@dataclass(eq=False)
class _KeySet:
    """What is known about one endpoint. ``lock`` is held by the request fetching it."""

    lock: trio.Lock = field(default_factory=trio.Lock)
    by_kid: dict[str, JsonWebKey] = field(default_factory=dict)
    sole: JsonWebKey | None = None  # the key, when the set holds exactly one
    size: int = 0
    fetched_at: float | None = None  # start of the last successful fetch
    attempted_at: float | None = None  # start of the last finished fetch, successful or not
    failure: str | None = None  # why the last finished fetch failed; None after a success


class JwksCache:
    """Key sets of JWKS endpoints by URL, fetched when a token needs a key they do not hold (see the module doc).

    Args:
        now: Monotonic seconds (``trio.current_time`` in production and on a test's virtual clock).
        timeout: Seconds one fetch may take in all.
        min_refetch_interval: Seconds between two fetches of one endpoint, at least.
        max_age: Seconds a key set is used before it is fetched again; at least ``min_refetch_interval``.
        max_endpoints: Endpoints kept; the least recently used one not being fetched is dropped beyond it.
        verify: Trusted roots for the endpoints' TLS certificates; None for httpx's defaults (see the module doc).

    Raises:
        ValueError: A duration is not positive, or ``max_age`` is below ``min_refetch_interval``.
    """

    def __init__(self, *, now: Callable[[], float] = trio.current_time, timeout: float = DEFAULT_TIMEOUT,
                 min_refetch_interval: float = DEFAULT_MIN_REFETCH_INTERVAL, max_age: float = DEFAULT_MAX_AGE,
                 max_endpoints: int = DEFAULT_MAX_ENDPOINTS, verify: ssl.SSLContext | None = None) -> None:
        if min(timeout, min_refetch_interval, max_age, max_endpoints) <= 0:
            raise ValueError("timeout, min_refetch_interval, max_age and max_endpoints must be positive")
        if max_age < min_refetch_interval:
            raise ValueError("max_age must be at least min_refetch_interval")
        self._now = now
        self._timeout = timeout
        self._min_refetch_interval = min_refetch_interval
        self._max_age = max_age
        self._max_endpoints = max_endpoints
        self._verify = verify
        self._sets: OrderedDict[str, _KeySet] = OrderedDict()

    async def key(self, endpoint: str, kid: str | None) -> JsonWebKey:
        """The key of ``endpoint``'s key set that verifies a token with header ``kid``.

        A token without a kid matches the set's key when the set holds exactly one. Fetches the set first when it
        was never fetched, is older than ``max_age`` or lacks the key, unless the endpoint was tried less than
        ``min_refetch_interval`` ago; waits for a fetch of the same endpoint already under way instead of starting
        another.

        Args:
            endpoint: The signer's ``jwksEndpoint`` URL.
            kid: The token header's ``kid``, or None when it has none.

        Returns:
            The matching key.

        Raises:
            JwksError: The fetch failed (now or within the last ``min_refetch_interval``), or the set, as last
                fetched, holds no matching key.
        """
        entry = self._entry(endpoint)
        found = self._fresh_key(entry, kid)
        if found is not None:
            return found
        async with entry.lock:
            found = self._fresh_key(entry, kid)  # the fetch this request waited for may have brought it
            if found is not None:
                return found
            if entry.attempted_at is not None and self._now() - entry.attempted_at < self._min_refetch_interval:
                raise JwksError(entry.failure or self._missing(endpoint, entry, kid))
            await self._refresh(endpoint, entry)
            found = self._fresh_key(entry, kid)
            if found is None:
                raise JwksError(self._missing(endpoint, entry, kid))
            return found

    def _entry(self, endpoint: str) -> _KeySet:
        entry = self._sets.get(endpoint)
        if entry is not None:
            self._sets.move_to_end(endpoint)
            return entry
        entry = self._sets[endpoint] = _KeySet()
        excess = len(self._sets) - self._max_endpoints
        if excess > 0:
            # A set being fetched stays: dropping it would let a second fetch of the endpoint start beside it.
            idle = [url for url, other in self._sets.items() if url != endpoint and not other.lock.locked()]
            for url in idle[:excess]:
                del self._sets[url]
        return entry

    def _fresh_key(self, entry: _KeySet, kid: str | None) -> JsonWebKey | None:
        if entry.fetched_at is None or self._now() - entry.fetched_at >= self._max_age:
            return None
        return entry.sole if kid is None else entry.by_kid.get(kid)

    @staticmethod
    def _missing(endpoint: str, entry: _KeySet, kid: str | None) -> str:
        if kid is None:
            return f"token has no kid and JWKS {endpoint} holds {entry.size} keys"
        return f"JWKS {endpoint} holds no key with kid {kid!r}"

    async def _refresh(self, endpoint: str, entry: _KeySet) -> None:
        """Fetch ``endpoint`` into ``entry``; on failure keep the keys it had and remember why.

        A cancelled fetch records nothing, so the next request fetches at once.
        """
        started = self._now()
        try:
            keys = _parse_key_set(endpoint, await self._download(endpoint))
        except JwksError as error:
            entry.attempted_at, entry.failure = started, error.reason
            raise
        entry.by_kid = {}
        for key in keys:
            if key.kid is not None:
                entry.by_kid.setdefault(key.kid, key)
        entry.sole = keys[0] if len(keys) == 1 else None
        entry.size = len(keys)
        entry.fetched_at = entry.attempted_at = started
        entry.failure = None

    async def _download(self, endpoint: str) -> bytes:
        body = bytearray()
        try:
            with trio.fail_after(self._timeout):  # httpx's timeout bounds each step; this bounds the whole fetch
                async with (
                    httpx.AsyncClient(verify=self._tls(), trust_env=True, timeout=self._timeout) as client,
                    client.stream("GET", endpoint, headers={"accept": "application/json"}) as response,
                ):
                    if response.status_code != 200:
                        raise JwksError(f"JWKS {endpoint} answered HTTP {response.status_code}")
                    declared = response.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > MAX_KEY_SET_BYTES:
                        raise JwksError(f"JWKS {endpoint} sent more than {MAX_KEY_SET_BYTES} bytes")
                    # Read to the end even past the bound (the timeout still applies): leaving httpx's chain of
                    # async generators half-consumed would have Trio collect and warn about each of them.
                    size = 0
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size <= MAX_KEY_SET_BYTES:
                            body += chunk
                    if size > MAX_KEY_SET_BYTES:
                        raise JwksError(f"JWKS {endpoint} sent more than {MAX_KEY_SET_BYTES} bytes")
        except (trio.TooSlowError, httpx.TimeoutException) as error:
            raise JwksError(f"JWKS {endpoint} did not answer within {self._timeout:g} s") from error
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise JwksError(f"JWKS {endpoint} could not be fetched: {_describe(error)}") from error
        return bytes(body)

    def _tls(self) -> ssl.SSLContext:
        # Made once: httpx would otherwise load the CA bundle for every fetch, blocking the event loop each time.
        if self._verify is None:
            self._verify = httpx.create_ssl_context(trust_env=True)
        return self._verify


def _describe(error: BaseException) -> str:
    """The error's type and the messages along its chain of causes: httpx often wraps the telling one (a TLS
    verification failure, say) in an exception whose own message is empty."""
    messages: list[str] = []
    cause: BaseException | None = error
    while cause is not None and len(messages) < 4:
        message = str(cause)
        if message and message not in messages:
            messages.append(message)
        cause = cause.__cause__ or cause.__context__
    return ": ".join([type(error).__name__, *messages])


def _parse_key_set(endpoint: str, body: bytes) -> tuple[JsonWebKey, ...]:
    """The usable signing keys of a JWKS document, in document order.

    Raises:
        JwksError: The body is not a JWKS document, or holds no usable key.
    """
    try:
        document = json.loads(body)
    except ValueError as error:  # also UnicodeDecodeError
        raise JwksError(f"JWKS {endpoint} is not JSON: {error}") from error
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise JwksError(f"JWKS {endpoint} has no 'keys' list")
    keys: list[JsonWebKey] = []
    skipped: list[str] = []
    for index, entry in enumerate(entries):
        try:
            keys.append(_signing_key(entry))
        except ValueError as error:
            skipped.append(f"key {index}: {error}")
    if not keys:
        detail = f" ({'; '.join(skipped[:3])})" if skipped else ""
        raise JwksError(f"JWKS {endpoint} holds no usable signing key{detail}")
    return tuple(keys)


def _signing_key(entry: Any) -> JsonWebKey:
    """One JWK as a public signing key.

    Raises:
        ValueError: The JWK is not a public RSA or EC (P-256/384/521) key meant for signatures, or is malformed.
    """
    if not isinstance(entry, Mapping):
        raise ValueError("not a JSON object")
    kty, kid, alg, use = (entry.get(name) for name in ("kty", "kid", "alg", "use"))
    if use not in (None, "sig"):
        raise ValueError(f"use {use!r}")
    if kid is not None and not isinstance(kid, str):
        raise ValueError("kid is not a string")
    if alg is not None and not isinstance(alg, str):
        raise ValueError("alg is not a string")
    if kty == "EC" and entry.get("crv") not in _CURVES:
        raise ValueError(f"curve {entry.get('crv')!r}")
    if kty not in ("RSA", "EC"):
        raise ValueError(f"kty {kty!r}")
    try:
        key = RSAAlgorithm.from_jwk(dict(entry)) if kty == "RSA" else ECAlgorithm.from_jwk(dict(entry))
    except (jwt.PyJWTError, ValueError, TypeError, KeyError) as error:
        raise ValueError(f"malformed {kty} key: {error}") from error
    if not isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
        raise ValueError("not a public key")
    return JsonWebKey(kid=kid, key=key, algorithm=alg)
