"""The etcd client over mutual TLS: a one-member etcd that serves clients only over TLS with a client certificate
signed by its CA. Requests, a watch stream and a lease keepalive go through with the CA, certificate and key; without
a client certificate, or without the CA, nothing does."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controller.etcd import EtcdClient, TlsFiles, Unavailable
from tests.certificates import Authority, new_key
from tests.cluster.etcd_cluster import EtcdCluster, ServerTls


def write_pair(directory: Path, name: str, pair: Authority) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    cert.write_text(pair.pem)
    key.write_bytes(pair.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert, key


def member_certificate(ca: Authority) -> Authority:
    """For 127.0.0.1, for serving and for etcd's gateway to present to etcd itself."""
    key = new_key()
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "etcd member")]))
        .issuer_name(ca.certificate.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .sign(ca.key, hashes.SHA256()))
    return Authority(key, certificate)


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[ServerTls, TlsFiles]:
    ca = Authority.create("etcd test CA")
    ca_file = tmp_path / "ca.pem"
    ca_file.write_text(ca.pem)
    server_cert, server_key = write_pair(tmp_path, "member", member_certificate(ca))
    client_cert, client_key = write_pair(tmp_path, "client", ca.sign("tollgate"))
    return ServerTls(ca_file, server_cert, server_key), TlsFiles(ca_file, client_cert, client_key)


@pytest.fixture
def tls_etcd(tmp_path: Path, tls_files: tuple[ServerTls, TlsFiles]) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster.start(tmp_path / "etcd", size=1, tls=tls_files[0])
    try:
        yield cluster
    finally:
        cluster.stop()


async def test_every_kind_of_call_goes_through_mutual_tls(tls_etcd: EtcdCluster,
                                                          tls_files: tuple[ServerTls, TlsFiles]) -> None:
    assert all(endpoint.startswith("https://") for endpoint in tls_etcd.endpoints)
    with trio.fail_after(30):
        async with EtcdClient(tls_etcd.endpoints, tls=tls_files[1]) as client:
            written = await client.put("tls/k", "v")
            found = await client.get("tls/k")
            assert found is not None and found.value == b"v"
            lease = await client.lease_grant(30)
            assert await client.lease_keepalive(lease.id) == lease.ttl
            async with client.watch("tls/", prefix=True, start_revision=written.header.revision) as watch:
                update = await anext(watch)
            assert [e.kv.value for e in update.events] == [b"v"]


async def test_without_a_client_certificate_or_the_ca_nothing_goes_through(
        tls_etcd: EtcdCluster, tls_files: tuple[ServerTls, TlsFiles]) -> None:
    with trio.fail_after(30):
        for tls in (TlsFiles(ca=tls_files[1].ca), TlsFiles(cert=tls_files[1].cert, key=tls_files[1].key)):
            async with EtcdClient(tls_etcd.endpoints, tls=tls, request_timeout=3) as client:
                with pytest.raises(Unavailable):
                    await client.get("tls/k")
                with pytest.raises(Unavailable):
                    async with client.watch("tls/", prefix=True, unavailable_timeout=1):
                        pass
