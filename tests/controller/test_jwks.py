"""controller.authentication.jwks: JWKS fetched over real HTTPS, cached per endpoint, refetched within limits.

The identity provider is a tiny ASGI app served by hypercorn on 127.0.0.1 with a certificate from a CA made here.
Time is Trio's ``mock_clock``: it stands still until a test jumps it, so the cache's intervals and the fetch timeout
are asserted exactly while real sockets carry the requests (an autojumping clock would fire timeouts whenever the
tasks wait on the network).
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import json
import socket
import ssl
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from hypercorn.config import Config
from hypercorn.trio import serve
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from controller.authentication.jwks import MAX_KEY_SET_BYTES, JwksCache, JwksError

INTERVAL = 30.0
MAX_AGE = 300.0
TIMEOUT = 2.0


class JwksServer:
    """An identity provider's JWKS endpoints as a raw ASGI app: a body per path, requests counted per path.

    ``hold``, when set to an unset event, makes every response wait for it; ``arrived`` is set by each request.
    """

    def __init__(self) -> None:
        self.responses: dict[str, tuple[int, bytes]] = {}
        self.declare_length = True  # False: no content-length, so the body goes out chunked
        self.requests: Counter[str] = Counter()
        self.hold: trio.Event | None = None
        self.arrived = trio.Event()

    def publish(self, path: str, *jwks: dict[str, Any], status: int = 200) -> None:
        self.responses[path] = (status, json.dumps({"keys": list(jwks)}).encode())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        self.requests[scope["path"]] += 1
        self.arrived.set()
        if self.hold is not None:
            await self.hold.wait()
        status, body = self.responses.get(scope["path"], (404, b"{}"))
        headers = [(b"content-type", b"application/json")]
        if self.declare_length:
            headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@dataclass(frozen=True)
class ServerPki:
    """A CA and a server certificate for 127.0.0.1 it issued, as files."""

    ca_path: Path
    cert_path: Path
    key_path: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_path))


def make_pki(directory: Path) -> ServerPki:
    """A fresh CA (EC P-256) and a server certificate for 127.0.0.1 and localhost, written to ``directory``."""
    now = dt.datetime.now(dt.UTC)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "JWKS test CA")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))
    server_cert = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
                   .issuer_name(ca_name).public_key(server_key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
                   .not_valid_after(now + dt.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                               x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                                  critical=False)
                   .sign(ca_key, hashes.SHA256()))
    pki = ServerPki(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    pki.ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    pki.cert_path.write_bytes(server_cert.public_bytes(serialization.Encoding.PEM))
    pki.key_path.write_bytes(server_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    return pki


async def start_jwks_server(nursery: trio.Nursery, server: JwksServer, pki: ServerPki) -> str:
    """Serve ``server`` over HTTPS on 127.0.0.1 in ``nursery``; returns the base URL (``https://127.0.0.1:port``)."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.certfile, config.keyfile = str(pki.cert_path), str(pki.key_path)
    config.accesslog = None
    config.errorlog = None
    binds: list[str] = await nursery.start(functools.partial(serve, server, config))  # type: ignore[arg-type]
    return binds[0]


def ec_jwk(kid: str | None, key: ec.EllipticCurvePrivateKey | None = None, **extra: Any) -> dict[str, Any]:
    public = (key or ec.generate_private_key(ec.SECP256R1())).public_key()
    jwk: dict[str, Any] = ECAlgorithm.to_jwk(public, as_dict=True)
    if kid is not None:
        jwk["kid"] = kid
    return jwk | extra


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache honours proxy variables (trust_env); the test server is local, so none may be set."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ServerPki:
    return make_pki(tmp_path_factory.mktemp("jwks-pki"))


@pytest.fixture
def server() -> JwksServer:
    return JwksServer()


@pytest.fixture
async def base_url(nursery: trio.Nursery, server: JwksServer, pki: ServerPki) -> str:
    return await start_jwks_server(nursery, server, pki)


@pytest.fixture
def cache(pki: ServerPki) -> JwksCache:
    return JwksCache(now=trio.current_time, timeout=TIMEOUT, min_refetch_interval=INTERVAL, max_age=MAX_AGE,
                     verify=pki.client_context())


async def _refused(cache: JwksCache, url: str, kid: str | None) -> str:
    with pytest.raises(JwksError) as caught:
        await cache.key(url, kid)
    return caught.value.reason


async def test_fetches_once_and_answers_known_kids_from_the_cache(
        mock_clock: trio.testing.MockClock, server: JwksServer, base_url: str, cache: JwksCache) -> None:
    ec_key, rsa_key = ec.generate_private_key(ec.SECP384R1()), rsa.generate_private_key(65537, 2048)
    rsa_jwk = RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True) | {"kid": "r", "alg": "PS256", "use": "sig"}
    server.publish("/jwks", ec_jwk("e", ec_key), rsa_jwk)
    url = base_url + "/jwks"

    first = await cache.key(url, "e")
    assert (first.kid, first.algorithm) == ("e", None)
    assert first.key.public_numbers() == ec_key.public_key().public_numbers()
    second = await cache.key(url, "r")
    assert (second.kid, second.algorithm) == ("r", "PS256")
    assert second.key.public_numbers() == rsa_key.public_key().public_numbers()
    mock_clock.jump(MAX_AGE - 0.001)
    assert await cache.key(url, "e") == first
    assert server.requests == {"/jwks": 1}


async def test_rotated_key_is_fetched_once_the_interval_has_passed_and_withdrawn_keys_stop_verifying(
        mock_clock: trio.testing.MockClock, server: JwksServer, base_url: str, cache: JwksCache) -> None:
    url = base_url + "/jwks"
    server.publish("/jwks", ec_jwk("old"))
    await cache.key(url, "old")
    server.publish("/jwks", ec_jwk("new"))

    # Just fetched: a new kid waits for the interval rather than costing the identity provider another request.
    assert await _refused(cache, url, "new") == f"JWKS {url} holds no key with kid 'new'"
    mock_clock.jump(INTERVAL)
    assert (await cache.key(url, "new")).kid == "new"
    assert server.requests["/jwks"] == 2
    assert await _refused(cache, url, "old") == f"JWKS {url} holds no key with kid 'old'"
    assert server.requests["/jwks"] == 2


async def test_a_flood_of_unknown_kids_fetches_at_most_once_per_interval(
        mock_clock: trio.testing.MockClock, server: JwksServer, base_url: str, cache: JwksCache) -> None:
    url = base_url + "/jwks"
    server.publish("/jwks", ec_jwk("a"))
    await cache.key(url, "a")
    for round_number in range(3):
        for index in range(20):
            await _refused(cache, url, f"random-{round_number}-{index}")
        assert server.requests["/jwks"] == 1 + round_number
        mock_clock.jump(INTERVAL)
    assert (await cache.key(url, "a")).kid == "a"  # the known key kept working throughout


async def test_a_key_set_older_than_max_age_is_fetched_again(
        mock_clock: trio.testing.MockClock, server: JwksServer, base_url: str, cache: JwksCache) -> None:
    url = base_url + "/jwks"
    server.publish("/jwks", ec_jwk("a"))
    await cache.key(url, "a")
    mock_clock.jump(MAX_AGE)
    server.publish("/jwks", ec_jwk("b"))
    assert await _refused(cache, url, "a") == f"JWKS {url} holds no key with kid 'a'"
    assert server.requests["/jwks"] == 2


async def test_concurrent_requests_share_one_fetch_and_its_outcome(
        server: JwksServer, base_url: str, cache: JwksCache) -> None:
    url = base_url + "/jwks"
    server.publish("/jwks", ec_jwk("a"))
    server.publish("/broken", status=503)
    server.hold = trio.Event()
    kids: list[str | None] = []
    reasons: list[str] = []

    async def fetch_good() -> None:
        kids.append((await cache.key(url, "a")).kid)

    async def fetch_broken() -> None:
        reasons.append(await _refused(cache, base_url + "/broken", "a"))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(fetch_good)
            nursery.start_soon(fetch_broken)
        await server.arrived.wait()  # every task is queued on its endpoint's lock by now: none touches the network
        server.hold.set()
    assert kids == ["a"] * 5
    assert reasons == [f"JWKS {base_url}/broken answered HTTP 503"] * 5
    assert server.requests == {"/jwks": 1, "/broken": 1}


async def test_a_token_without_kid_matches_only_a_set_of_one_key(
        server: JwksServer, base_url: str, cache: JwksCache) -> None:
    server.publish("/anonymous", ec_jwk(None))
    server.publish("/named", ec_jwk("only"))
    server.publish("/two", ec_jwk(None), ec_jwk("b"))

    assert (await cache.key(base_url + "/anonymous", None)).kid is None
    assert await _refused(cache, base_url + "/anonymous", "a") == f"JWKS {base_url}/anonymous holds no key with kid 'a'"
    assert (await cache.key(base_url + "/named", None)).kid == "only"
    assert await _refused(cache, base_url + "/two", None) == f"token has no kid and JWKS {base_url}/two holds 2 keys"
    assert (await cache.key(base_url + "/two", "b")).kid == "b"


async def test_only_public_signing_keys_are_kept(server: JwksServer, base_url: str, cache: JwksCache) -> None:
    url = base_url + "/jwks"
    private = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()), as_dict=True) | {"kid": "private"}
    secp256k1 = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256K1()).public_key(), as_dict=True)
    server.publish("/jwks",
                   {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
                   ec_jwk("encryption", use="enc"),
                   private,
                   secp256k1 | {"kid": "k1"},
                   {"kty": "RSA", "kid": "broken", "n": "AQAB"},
                   {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
                   ec_jwk(7),  # type: ignore[arg-type]
                   "not a key",  # type: ignore[arg-type]
                   ec_jwk("good"))
    assert (await cache.key(url, "good")).kid == "good"
    for kid in ("hmac", "encryption", "private", "k1", "broken", "ed"):
        assert await _refused(cache, url, kid) == f"JWKS {url} holds no key with kid {kid!r}"


@pytest.mark.parametrize(("status", "body", "chunked", "reason"), [
    (500, b'{"keys": []}', False, "answered HTTP 500"),
    (200, b"<html>", False, "is not JSON: Expecting value: line 1 column 1 (char 0)"),
    (200, b"\xff\xfe", True, "is not JSON: Expecting value: line 1 column 1 (char 0)"),
    (200, b"[]", False, "has no 'keys' list"),
    (200, b'{"keys": {}}', False, "has no 'keys' list"),
    (200, b'{"keys": []}', False, "holds no usable signing key"),
    (200, b'{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}', False, "holds no usable signing key (key 0: kty 'oct')"),
    (200, b" " * (MAX_KEY_SET_BYTES + 1), False, f"sent more than {MAX_KEY_SET_BYTES} bytes"),
    (200, b" " * (MAX_KEY_SET_BYTES + 1), True, f"sent more than {MAX_KEY_SET_BYTES} bytes"),
])
async def test_a_failed_fetch_is_reported_and_not_repeated_within_the_interval(
        mock_clock: trio.testing.MockClock, server: JwksServer, base_url: str, cache: JwksCache,
        status: int, body: bytes, chunked: bool, reason: str) -> None:
    url = base_url + "/jwks"
    server.responses["/jwks"] = (status, body)
    server.declare_length = not chunked
    assert await _refused(cache, url, "a") == f"JWKS {url} {reason}"
    assert await _refused(cache, url, "b") == f"JWKS {url} {reason}"
    assert server.requests["/jwks"] == 1
    mock_clock.jump(INTERVAL)
    server.publish("/jwks", ec_jwk("a"))
    assert (await cache.key(url, "a")).kid == "a"
    assert server.requests["/jwks"] == 2


async def test_a_failed_refetch_keeps_the_keys_already_fetched_until_they_are_too_old(
        mock_clock: trio.testing.MockClock, server: JwksServer, base_url: str, cache: JwksCache) -> None:
    url = base_url + "/jwks"
    server.publish("/jwks", ec_jwk("a"))
    await cache.key(url, "a")
    mock_clock.jump(INTERVAL)
    server.publish("/jwks", status=502)
    assert await _refused(cache, url, "b") == f"JWKS {url} answered HTTP 502"
    assert (await cache.key(url, "a")).kid == "a"
    assert server.requests["/jwks"] == 2
    # Once the keys are too old they are not used any more, even while the endpoint fails.
    mock_clock.jump(MAX_AGE - INTERVAL)
    assert await _refused(cache, url, "a") == f"JWKS {url} answered HTTP 502"
    assert server.requests["/jwks"] == 3


async def test_a_silent_server_fails_the_fetch_at_the_timeout(
        mock_clock: trio.testing.MockClock, server: JwksServer, base_url: str, cache: JwksCache) -> None:
    url = base_url + "/jwks"
    server.hold = trio.Event()  # never set: the request is received and never answered
    outcome: list[tuple[str, float]] = []

    async def fetch() -> None:
        started = trio.current_time()
        outcome.append((await _refused(cache, url, "a"), trio.current_time() - started))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetch)
        await server.arrived.wait()
        mock_clock.jump(TIMEOUT)
    assert outcome == [(f"JWKS {url} did not answer within 2 s", TIMEOUT)]


async def test_a_cancelled_fetch_lets_the_next_request_fetch_at_once(
        server: JwksServer, base_url: str, cache: JwksCache) -> None:
    url = base_url + "/jwks"
    server.publish("/jwks", ec_jwk("a"))
    server.hold = trio.Event()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cache.key, url, "a")
            await server.arrived.wait()
            scope.cancel()
    server.hold = None
    assert (await cache.key(url, "a")).kid == "a"
    assert server.requests["/jwks"] == 2


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_an_unreachable_server_fails_the_fetch(cache: JwksCache) -> None:
    url = f"https://127.0.0.1:{_closed_port()}/jwks"
    assert (await _refused(cache, url, "a")).startswith(f"JWKS {url} could not be fetched: ConnectError")
    bad = "ftp://idp.example/jwks"
    assert (await _refused(cache, bad, "a")).startswith(f"JWKS {bad} could not be fetched: UnsupportedProtocol")


async def test_tls_is_verified_against_the_default_roots_or_ssl_cert_file(
        server: JwksServer, base_url: str, pki: ServerPki, monkeypatch: pytest.MonkeyPatch) -> None:
    url = base_url + "/jwks"
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    server.publish("/jwks", ec_jwk("a"))
    reason = await _refused(JwksCache(now=trio.current_time), url, "a")
    assert reason.startswith(f"JWKS {url} could not be fetched: ConnectError")
    assert "CERTIFICATE_VERIFY_FAILED" in reason
    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca_path))
    assert (await JwksCache(now=trio.current_time).key(url, "a")).kid == "a"


async def test_endpoints_beyond_the_bound_drop_the_least_recently_used(
        server: JwksServer, base_url: str, pki: ServerPki) -> None:
    cache = JwksCache(now=trio.current_time, min_refetch_interval=INTERVAL, max_age=MAX_AGE, max_endpoints=2,
                      verify=pki.client_context())
    for path in ("/a", "/b", "/c"):
        server.publish(path, ec_jwk("k"))
    for path in ("/a", "/b", "/a", "/c", "/a", "/b"):
        await cache.key(base_url + path, "k")
    assert server.requests == {"/a": 1, "/b": 2, "/c": 1}


@pytest.mark.parametrize("arguments", [
    {"timeout": 0}, {"min_refetch_interval": -1}, {"max_endpoints": 0},
    {"min_refetch_interval": 60, "max_age": 59},
])
def test_unworkable_settings_are_refused(arguments: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        JwksCache(**arguments)  # type: ignore[arg-type]
