"""Every Management API kind the admin CLI knows: its path, table columns, and create/update flags.

Declared once here; the CLI's verbs are derived from this table (``list``/``show``/``delete`` take any kind, ``create``
and ``update`` have one subcommand per writable kind with its flags). Kinds are named by their path segment
(``service-policies``) or its singular (``service-policy``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import click

from controller.admin.flags import (
    OS_TYPES,
    Flag,
    as_list,
    enrollment,
    json_document,
    operating_systems,
    processes,
    reference,
    references,
    roles,
    text_or_file,
)
from controller.admin.output import Column

__all__ = ["KINDS", "POSTURE_CHECK_TYPES", "Kind", "find_kind"]

POSTURE_CHECK_TYPES = ("OS", "MAC", "DOMAIN", "PROCESS", "PROCESS_MULTI", "MFA")
_SEMANTIC = click.Choice(["AllOf", "AnyOf"])


@dataclass(frozen=True)
class Kind:
    """One kind of the Management API as the CLI shows and writes it.

    Attributes:
        path: the collection's path segment (``service-policies``).
        singular: the kind's singular name (``service-policy``), accepted wherever a kind is.
        columns: the table columns of ``tollgate list``.
        flags: the options of ``tollgate create`` and ``tollgate update`` for this kind.
        named: rows have a unique ``name`` (create takes it as an argument; ids may be given as names).
        creatable: ``POST /{path}`` exists.
        updatable: ``PATCH /{path}/{id}`` exists.
        deletable: ``DELETE /{path}/{id}`` exists.
        create_defaults: values of fields the API requires on create that have an obvious default.
        discriminator: the field choosing the kind's variant (posture checks' ``typeId``); PATCH must repeat it.
    """

    path: str
    singular: str
    columns: tuple[Column, ...]
    flags: tuple[Flag, ...] = ()
    named: bool = True
    creatable: bool = True
    updatable: bool = True
    deletable: bool = True
    create_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    discriminator: str | None = None

    def flag(self, name: str) -> Flag | None:
        """This kind's flag called ``name`` (without dashes), or None."""
        return next((flag for flag in self.flags if flag.name == name), None)


def _role_attributes() -> Flag:
    return Flag("role-attributes", "roleAttributes", "role attributes, comma-separated (an empty text clears them)",
                as_list, metavar="A,B")


def _roles(name: str, wire: str, kind: str) -> Flag:
    return Flag(name, wire, f"{kind} roles, comma-separated: #attribute, #all, @id or @name", roles(kind),
                metavar="ROLES")


def _semantic() -> Flag:
    return Flag("semantic", "semantic", "how the roles combine: AllOf or AnyOf (AllOf)", kind=_SEMANTIC)


def _variant(names: str, flag: Flag) -> Flag:
    return Flag(flag.name, flag.field, f"[{names}] {flag.help}", flag.convert, flag.metavar, flag.kind, flag.switch,
                flag.multiple, frozenset(names.split(",")))


_POLICY_DEFAULTS = MappingProxyType({"semantic": "AllOf"})

_IDENTITIES = Kind(
    "identities", "identity",
    (("id", "id"), ("name", "name"), ("type", "typeId"), ("admin", "isAdmin"), ("roles", "roleAttributes"),
     ("auth policy", "authPolicy")),
    (Flag("type", "type", "identity type (Default)",
          kind=click.Choice(["User", "Device", "Service", "Router", "Default"])),
     Flag("admin", "isAdmin", "administrator (no)", switch=True),
     _role_attributes(),
     Flag("auth-policy", "authPolicyId", "auth policy, by id or name", reference("auth-policies"), "POLICY"),
     Flag("external-id", "externalId", "external id matched by certificate or JWT login", metavar="ID"),
     Flag("enroll", "enrollment", "create an enrolment: ott (one-time token) or updb (password, for the name)",
          enrollment, kind=click.Choice(["ott", "updb"]))),
    create_defaults=MappingProxyType({"type": "Default", "isAdmin": False}),
)

_SERVICES = Kind(
    "services", "service",
    (("id", "id"), ("name", "name"), ("encryption", "encryptionRequired"), ("roles", "roleAttributes"),
     ("configs", "configs"), ("strategy", "terminatorStrategy")),
    (Flag("configs", "configs", "configs, comma-separated ids or names", references("configs"), "CONFIGS"),
     _role_attributes(),
     Flag("encryption-required", "encryptionRequired", "end-to-end encryption required (yes; create only)",
          switch=True),
     Flag("terminator-strategy", "terminatorStrategy", "terminator strategy (smartrouting)", metavar="NAME"),
     Flag("max-idle-time-millis", "maxIdleTimeMillis", "idle milliseconds before a circuit closes", kind=click.INT)),
    create_defaults=MappingProxyType({"encryptionRequired": True}),
)

_SERVICE_POLICIES = Kind(
    "service-policies", "service-policy",
    (("id", "id"), ("name", "name"), ("type", "type"), ("semantic", "semantic"), ("identities", "identityRoles"),
     ("services", "serviceRoles"), ("posture checks", "postureCheckRoles")),
    (Flag("type", "type", "Dial or Bind (required on create)", kind=click.Choice(["Dial", "Bind"])),
     _semantic(),
     _roles("identity-roles", "identityRoles", "identities"),
     _roles("service-roles", "serviceRoles", "services"),
     _roles("posture-check-roles", "postureCheckRoles", "posture-checks")),
    create_defaults=_POLICY_DEFAULTS,
)

_EDGE_ROUTER_POLICIES = Kind(
    "edge-router-policies", "edge-router-policy",
    (("id", "id"), ("name", "name"), ("semantic", "semantic"), ("edge routers", "edgeRouterRoles"),
     ("identities", "identityRoles")),
    (_semantic(),
     _roles("edge-router-roles", "edgeRouterRoles", "edge-routers"),
     _roles("identity-roles", "identityRoles", "identities")),
    create_defaults=_POLICY_DEFAULTS,
)

_SERVICE_EDGE_ROUTER_POLICIES = Kind(
    "service-edge-router-policies", "service-edge-router-policy",
    (("id", "id"), ("name", "name"), ("semantic", "semantic"), ("edge routers", "edgeRouterRoles"),
     ("services", "serviceRoles")),
    (_semantic(),
     _roles("edge-router-roles", "edgeRouterRoles", "edge-routers"),
     _roles("service-roles", "serviceRoles", "services")),
    create_defaults=_POLICY_DEFAULTS,
)

_ROUTER_FLAGS = (
    Flag("cost", "cost", "routing cost, 0 to 65535", kind=click.INT),
    Flag("no-traversal", "noTraversal", "carry no traffic between other routers", switch=True),
    Flag("disabled", "disabled", "disabled", switch=True),
)

_EDGE_ROUTERS = Kind(
    "edge-routers", "edge-router",
    (("id", "id"), ("name", "name"), ("online", "isOnline"), ("verified", "isVerified"), ("roles", "roleAttributes"),
     ("tunneler", "isTunnelerEnabled")),
    (_role_attributes(), Flag("tunneler-enabled", "isTunnelerEnabled", "the router hosts a tunneler", switch=True),
     *_ROUTER_FLAGS),
)

_ROUTERS = Kind(
    "routers", "router",
    (("id", "id"), ("name", "name"), ("online", "isOnline"), ("verified", "isVerified"), ("cost", "cost")),
    _ROUTER_FLAGS,
)

_CONFIGS = Kind(
    "configs", "config",
    (("id", "id"), ("name", "name"), ("config type", "configType")),
    (Flag("config-type", "configTypeId", "config type, by id or name (required on create)",
          reference("config-types"), "TYPE"),
     Flag("data", "data", "the config's data: JSON or @FILE (required on create)", json_document, "JSON|@FILE")),
)

_CONFIG_TYPES = Kind(
    "config-types", "config-type",
    (("id", "id"), ("name", "name")),
    (Flag("schema", "schema", "JSON schema of the configs of this type: JSON or @FILE", json_document,
          "JSON|@FILE"),),
)

_POSTURE_CHECKS = Kind(
    "posture-checks", "posture-check",
    (("id", "id"), ("name", "name"), ("type", "typeId"), ("roles", "roleAttributes")),
    (Flag("type", "typeId", "check type (required on create)", kind=click.Choice(POSTURE_CHECK_TYPES)),
     _role_attributes(),
     _variant("OS", Flag("os", "operatingSystems", "TYPE[:VERSION,...], repeatable (Windows:>=10.0.19041)",
                         operating_systems, "TYPE[:VERSIONS]", multiple=True)),
     _variant("MAC", Flag("mac-addresses", "macAddresses", "MAC addresses, comma-separated", as_list, "MACS")),
     _variant("DOMAIN", Flag("domains", "domains", "Windows domains, comma-separated", as_list, "DOMAINS")),
     _variant("PROCESS", Flag("os-type", "process.osType", "the process's OS type",
                              kind=click.Choice(OS_TYPES))),
     _variant("PROCESS", Flag("path", "process.path", "the process's executable path", metavar="PATH")),
     _variant("PROCESS", Flag("hashes", "process.hashes", "accepted SHA-256 hashes of the executable, comma-separated",
                              as_list, "HASHES")),
     _variant("PROCESS", Flag("signer-fingerprint", "process.signerFingerprint",
                              "SHA-1 fingerprint of the signing certificate", metavar="FINGERPRINT")),
     _variant("PROCESS_MULTI", Flag("process", "processes",
                                    "OSTYPE:PATH[|hashes=H,...][|signers=F,...], repeatable", processes,
                                    "SPEC", multiple=True)),
     _variant("PROCESS_MULTI", Flag("semantic", "semantic", "which processes must run: AllOf or AnyOf",
                                    kind=_SEMANTIC)),
     _variant("MFA", Flag("timeout-seconds", "timeoutSeconds", "seconds an MFA pass lasts (-1: forever)",
                          kind=click.INT)),
     _variant("MFA", Flag("prompt-on-wake", "promptOnWake", "ask for MFA again after the device wakes", switch=True)),
     _variant("MFA", Flag("prompt-on-unlock", "promptOnUnlock", "ask for MFA again after an unlock", switch=True)),
     _variant("MFA", Flag("ignore-legacy-endpoints", "ignoreLegacyEndpoints",
                          "do not time out endpoints too old to report wake and unlock", switch=True))),
    discriminator="typeId",
)

_AUTHENTICATORS = Kind(
    "authenticators", "authenticator",
    (("id", "id"), ("method", "method"), ("identity", "identity"), ("username", "username"),
     ("fingerprint", "fingerprint")),
    (Flag("identity", "identityId", "the identity, by id or name (create only)", reference("identities"),
          "IDENTITY"),
     Flag("method", "method", "updb or cert (create only)", kind=click.Choice(["updb", "cert"])),
     Flag("username", "username", "login name (updb)", metavar="NAME"),
     Flag("password", "password", "password (updb)", metavar="PASSWORD"),
     Flag("cert-pem", "certPem", "certificate PEM or @FILE (cert)", text_or_file, "PEM|@FILE")),
    named=False,
)

_ENROLLMENTS = Kind(
    "enrollments", "enrollment",
    (("id", "id"), ("method", "method"), ("identity", "identity"), ("expires", "expiresAt")),
    (Flag("identity", "identityId", "the identity, by id or name", reference("identities"), "IDENTITY"),
     Flag("method", "method", "ott, ottca or updb", kind=click.Choice(["ott", "ottca", "updb"])),
     Flag("ca", "caId", "the CA of an ottca enrolment, by id or name", reference("cas"), "CA"),
     Flag("username", "username", "the username of an updb enrolment", metavar="NAME"),
     Flag("expires-at", "expiresAt", "when the enrolment expires (RFC 3339)", metavar="TIME")),
    named=False, updatable=False,
)

_CAS = Kind(
    "cas", "ca",
    (("id", "id"), ("name", "name"), ("verified", "isVerified"), ("auth", "isAuthEnabled"),
     ("auto enrol", "isAutoCaEnrollmentEnabled"), ("ott enrol", "isOttCaEnrollmentEnabled")),
    (Flag("cert-pem", "certPem", "the CA certificate: PEM or @FILE (create only)", text_or_file, "PEM|@FILE"),
     Flag("identity-roles", "identityRoles", "role attributes given to the identities it enrols, comma-separated",
          as_list, "A,B"),
     Flag("auth-enabled", "isAuthEnabled", "its certificates may log in (yes)", switch=True),
     Flag("auto-ca-enrollment", "isAutoCaEnrollmentEnabled", "enrol unknown certificates on first login (no)",
          switch=True),
     Flag("ott-ca-enrollment", "isOttCaEnrollmentEnabled", "allow ottca enrolments (no)", switch=True),
     Flag("identity-name-format", "identityNameFormat", "name of auto-enrolled identities", metavar="FORMAT")),
    create_defaults=MappingProxyType({"identityRoles": [], "isAuthEnabled": True, "isAutoCaEnrollmentEnabled": False,
                                      "isOttCaEnrollmentEnabled": False}),
)

_EXTERNAL_JWT_SIGNERS = Kind(
    "external-jwt-signers", "external-jwt-signer",
    (("id", "id"), ("name", "name"), ("issuer", "issuer"), ("audience", "audience"), ("enabled", "enabled")),
    (Flag("issuer", "issuer", "the tokens' iss claim (required on create)", metavar="ISSUER"),
     Flag("audience", "audience", "the tokens' aud claim (required on create)", metavar="AUDIENCE"),
     Flag("enabled", "enabled", "tokens of this signer may log in (yes)", switch=True),
     Flag("cert-pem", "certPem", "the signing certificate: PEM or @FILE", text_or_file, "PEM|@FILE"),
     Flag("jwks-endpoint", "jwksEndpoint", "URL of the signer's key set", metavar="URL"),
     Flag("kid", "kid", "key id of the certificate", metavar="KID"),
     Flag("claims-property", "claimsProperty", "claim naming the identity (sub)", metavar="CLAIM"),
     Flag("use-external-id", "useExternalId", "match the claim to externalId instead of the id", switch=True),
     Flag("external-auth-url", "externalAuthUrl", "where endpoints get tokens", metavar="URL")),
    create_defaults=MappingProxyType({"enabled": True}),
)

_TERMINATORS = Kind(
    "terminators", "terminator",
    (("id", "id"), ("service", "service"), ("router", "router"), ("binding", "binding"), ("address", "address"),
     ("cost", "cost")),
    (Flag("service", "service", "the service, by id or name", reference("services"), "SERVICE"),
     Flag("router", "router", "the router, by id or name", reference("routers"), "ROUTER"),
     Flag("binding", "binding", "binding (transport, edge...)", metavar="BINDING"),
     Flag("address", "address", "address the router dials", metavar="ADDRESS"),
     Flag("cost", "cost", "cost, 0 to 65535", kind=click.INT),
     Flag("precedence", "precedence", "default, required or failed",
          kind=click.Choice(["default", "required", "failed"]))),
    named=False,
)

_AUTH_POLICIES = Kind(
    "auth-policies", "auth-policy",
    (("id", "id"), ("name", "name"), ("updb", "primary.updb.allowed"), ("cert", "primary.cert.allowed"),
     ("totp", "secondary.requireTotp")),
    (Flag("primary", "primary", "the primary factors object: JSON or @FILE", json_document, "JSON|@FILE"),
     Flag("secondary", "secondary", "the secondary factors object: JSON or @FILE", json_document, "JSON|@FILE")),
)

_API_SESSIONS = Kind(
    "api-sessions", "api-session",
    (("id", "id"), ("identity", "identity"), ("ip", "ipAddress"), ("last activity", "lastActivityAt"),
     ("mfa", "isMfaComplete")),
    named=False, creatable=False, updatable=False,
)

_SESSIONS = Kind(
    "sessions", "session",
    (("id", "id"), ("type", "type"), ("identity", "identity"), ("service", "service"), ("api session", "apiSessionId")),
    named=False, creatable=False, updatable=False,
)

_IDENTITY_TYPES = Kind("identity-types", "identity-type", (("id", "id"), ("name", "name")),
                       creatable=False, updatable=False, deletable=False)

_POSTURE_CHECK_TYPES = Kind("posture-check-types", "posture-check-type",
                            (("id", "id"), ("name", "name"), ("operating systems", "operatingSystems")),
                            creatable=False, updatable=False, deletable=False)

KINDS: tuple[Kind, ...] = (
    _IDENTITIES, _SERVICES, _SERVICE_POLICIES, _EDGE_ROUTERS, _EDGE_ROUTER_POLICIES, _SERVICE_EDGE_ROUTER_POLICIES,
    _ROUTERS, _CONFIGS, _CONFIG_TYPES, _POSTURE_CHECKS, _AUTHENTICATORS, _ENROLLMENTS, _CAS, _EXTERNAL_JWT_SIGNERS,
    _TERMINATORS, _AUTH_POLICIES, _API_SESSIONS, _SESSIONS, _IDENTITY_TYPES, _POSTURE_CHECK_TYPES,
)
"""Every kind with a list operation in the Management API, in the order help lists them."""

_BY_NAME = {name: kind for kind in KINDS for name in (kind.path, kind.singular)}


def find_kind(name: str) -> Kind | None:
    """The kind called ``name`` (its path or singular, any case), or None."""
    return _BY_NAME.get(name.lower())
