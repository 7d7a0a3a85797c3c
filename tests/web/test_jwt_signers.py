"""External JWT signers over HTTP: one key source, certificate facts computed from the PEM, protected when used."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding

from controller.resources.sessions import DEFAULT_AUTH_POLICY
from tests.support import Api

NOT_BEFORE = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
NOT_AFTER = dt.datetime(2034, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def certificate(common_name: str) -> tuple[str, str]:
    """A self-signed PEM certificate and its lower-case hex SHA-1 fingerprint."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, common_name)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(Encoding.PEM).decode(), hashlib.sha1(cert.public_bytes(Encoding.DER)).hexdigest()


def signer(**extra: Any) -> dict[str, Any]:
    return {"name": "idp", "enabled": True, "issuer": "https://idp.example", "audience": "ziti", **extra}


def assert_invalid(reply: Any, field: str, reason: str, code: str = "COULD_NOT_VALIDATE") -> None:
    assert (reply.status, reply.error["code"]) == (400, code), reply.body
    assert (reply.error["cause"]["field"], reply.error["cause"]["reason"]) == (field, reason)


async def test_certificate_signer_shows_the_certificate_facts(admin: Api) -> None:
    pem, fingerprint = certificate("idp-signer")
    reply = await admin.post("/external-jwt-signers", signer(certPem=pem, kid="k1",
                                                             externalAuthUrl="https://idp.example/auth"))
    assert reply.status == 201, reply.body
    detail = (await admin.get(f"/external-jwt-signers/{reply.data['id']}")).data
    assert detail == reply.data
    assert (detail["name"], detail["enabled"], detail["issuer"], detail["audience"]) == (
        "idp", True, "https://idp.example", "ziti")
    assert (detail["certPem"], detail["jwksEndpoint"], detail["kid"]) == (pem, None, "k1")
    assert (detail["commonName"], detail["fingerprint"]) == ("idp-signer", fingerprint)
    assert (detail["notBefore"], detail["notAfter"]) == ("2024-01-02T03:04:05.000Z", "2034-01-02T03:04:05.000Z")
    assert (detail["claimsProperty"], detail["useExternalId"]) == ("sub", False)
    assert detail["externalAuthUrl"] == "https://idp.example/auth"

    listed = await admin.get("/external-jwt-signers", query={"filter": 'commonName = "idp-signer" and enabled'})
    assert [s["id"] for s in listed.data] == [detail["id"]]
    assert {"name", "issuer", "audience", "kid", "fingerprint", "commonName", "notAfter", "notBefore", "enabled",
            "claimsProperty", "useExternalId", "certPem"} <= set(listed.body["meta"]["filterableFields"])


async def test_jwks_signer_has_empty_certificate_facts(admin: Api) -> None:
    reply = await admin.post("/external-jwt-signers", signer(jwksEndpoint="https://idp.example/jwks",
                                                             audience=None, claimsProperty="email",
                                                             useExternalId=True))
    assert reply.status == 201, reply.body
    data = reply.data
    assert (data["jwksEndpoint"], data["certPem"], data["audience"]) == ("https://idp.example/jwks", None, None)
    assert (data["commonName"], data["fingerprint"]) == ("", None)
    assert (data["notBefore"], data["notAfter"]) == ("0001-01-01T00:00:00.000Z", "0001-01-01T00:00:00.000Z")
    assert (data["claimsProperty"], data["useExternalId"]) == ("email", True)


async def test_exactly_one_key_source(admin: Api) -> None:
    pem, _ = certificate("a")
    assert_invalid(await admin.post("/external-jwt-signers", signer()), "certPem",
                   "jwksEndpoint or certPem is required")
    assert_invalid(await admin.post("/external-jwt-signers", signer(certPem=" ", jwksEndpoint="")), "certPem",
                   "jwksEndpoint or certPem is required")
    assert_invalid(await admin.post("/external-jwt-signers", signer(certPem=pem, jwksEndpoint="https://i/jwks")),
                   "jwksEndpoint", "only one of jwksEndpoint or certPem may be defined")
    assert_invalid(await admin.post("/external-jwt-signers", signer(jwksEndpoint="idp.example/jwks")),
                   "jwksEndpoint", "jwksEndpoint must be an absolute http or https URL")
    assert (await admin.get("/external-jwt-signers")).data == []


async def test_cert_pem_must_hold_one_certificate(admin: Api) -> None:
    first, _ = certificate("a")
    second, _ = certificate("b")
    for pem, count in (("not a certificate", 0), (first + second, 2),
                       ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 0)):
        reply = await admin.post("/external-jwt-signers", signer(certPem=pem))
        assert_invalid(reply, "certPem", "certPem must hold exactly one PEM certificate", code="INVALID_CERT_PEM")
        assert reply.error["cause"]["value"] == f"{count} certificates"
        assert reply.error["message"] == ("the supplied certificate PEM is either invalid or contains the incorrect "
                                          "number of certificates")
    assert (await admin.get("/external-jwt-signers")).data == []


async def test_required_and_unique_fields(admin: Api) -> None:
    jwks = {"jwksEndpoint": "https://idp.example/jwks"}
    for field in ("name", "enabled", "issuer", "audience"):
        body = signer(**jwks)
        del body[field]
        assert_invalid(await admin.post("/external-jwt-signers", body), field, f"{field} in body is required")
    assert_invalid(await admin.post("/external-jwt-signers", signer(issuer=" ", **jwks)), "issuer",
                   "issuer must not be empty")
    signer_id = await admin.create("/external-jwt-signers", signer(**jwks))
    reply = await admin.post("/external-jwt-signers", signer(name="other", **jwks))
    assert_invalid(reply, "issuer", "issuer is must be unique")
    pem, fingerprint = certificate("same")
    await admin.create("/external-jwt-signers", signer(name="c1", issuer="i1", certPem=pem))
    reply = await admin.post("/external-jwt-signers", signer(name="c2", issuer="i2", certPem=pem))
    assert_invalid(reply, "fingerprint", "fingerprint is must be unique")
    assert reply.error["cause"]["value"] == fingerprint
    assert_invalid(await admin.put(f"/external-jwt-signers/{signer_id}", {"name": "idp", "issuer": "x",
                                                                          "audience": None, **jwks}),
                   "enabled", "enabled in body is required")


async def test_switching_key_source_recomputes_the_facts(admin: Api) -> None:
    pem, fingerprint = certificate("first")
    signer_id = await admin.create("/external-jwt-signers", signer(certPem=pem))
    reply = await admin.patch(f"/external-jwt-signers/{signer_id}",
                              {"certPem": None, "jwksEndpoint": "https://idp.example/jwks"})
    assert reply.status == 200, reply.body
    detail = (await admin.get(f"/external-jwt-signers/{signer_id}")).data
    assert (detail["certPem"], detail["fingerprint"], detail["commonName"]) == (None, None, "")
    assert detail["notAfter"] == "0001-01-01T00:00:00.000Z"

    other, other_fingerprint = certificate("second")
    reply = await admin.put(f"/external-jwt-signers/{signer_id}", signer(enabled=False, certPem=other))
    assert reply.status == 200, reply.body
    detail = (await admin.get(f"/external-jwt-signers/{signer_id}")).data
    assert (detail["enabled"], detail["jwksEndpoint"], detail["commonName"], detail["fingerprint"]) == (
        False, None, "second", other_fingerprint)
    # The first certificate's fingerprint is free again.
    assert (await admin.post("/external-jwt-signers", signer(name="n", issuer="j", certPem=pem))).status == 201
    assert fingerprint != other_fingerprint


async def test_a_signer_used_by_an_auth_policy_cannot_be_deleted(admin: Api) -> None:
    signer_id = await admin.create("/external-jwt-signers", signer(jwksEndpoint="https://idp.example/jwks"))
    primary = dict(DEFAULT_AUTH_POLICY["primary"])
    primary["extJwt"] = {"allowed": True, "allowedSigners": [signer_id]}
    policy_id = await admin.create("/auth-policies", {"name": "ext", "primary": primary,
                                                      "secondary": DEFAULT_AUTH_POLICY["secondary"]})
    reply = await admin.delete(f"/external-jwt-signers/{signer_id}")
    assert (reply.status, reply.error["code"]) == (409, "CAN_NOT_DELETE_REFERENCED_ENTITY")
    assert reply.error["cause"] == {"field": "primary.extJwt.allowedSigners", "reason": "referenced by 1 auth-policies",
                                    "value": f"[{policy_id}]"}
    assert (await admin.get(f"/external-jwt-signers/{signer_id}")).status == 200

    assert (await admin.patch(f"/auth-policies/{policy_id}", {
        "primary": DEFAULT_AUTH_POLICY["primary"],
        "secondary": {"requireTotp": False, "requireExtJwtSigner": signer_id}})).status == 200
    reply = await admin.delete(f"/external-jwt-signers/{signer_id}")
    assert (reply.status, reply.error["cause"]["field"]) == (409, "secondary.requireExtJwtSigner")

    assert (await admin.delete(f"/auth-policies/{policy_id}")).status == 200
    assert (await admin.delete(f"/external-jwt-signers/{signer_id}")).status == 200
