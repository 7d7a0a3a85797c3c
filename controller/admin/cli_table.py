"""How the admin CLI presents each kind: its table's columns, and which fields get a create/update flag with what
option name and help text.

This table holds presentation only. It names fields of the resource specs and never says what the specs say:
a flag's click type (choices of an enum, a number, an on/off switch), its conversion of names to ids for a
reference or a role list, its variant, the defaults and "required on create" in its help, and which kinds can be
created, updated or deleted are derived from the spec (``controller/admin/kinds.py``); ``tests/admin/
test_kinds_agree.py`` checks every name here against the specs.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.admin.flags import (
    ENROLL_METHODS,
    Converter,
    enrollment,
    operating_systems,
    processes,
    text_or_file,
)
from controller.admin.output import Column

__all__ = ["TABLE", "FlagText", "KindText"]


@dataclass(frozen=True, slots=True)
class FlagText:
    """The presentation of one flag of ``tollgate create/update KIND``.

    Attributes:
        name: the long option without dashes (``auth-policy``).
        field: the wire field it sets; dots for a field inside an object (``process.osType``).
        help: what the field is; the spec's facts (default, bounds, required on create, create only, the variant)
            are added to it. None for a role list, whose help is derived.
        metavar: what the help shows for the value (derived for role lists and JSON objects when None).
        convert: for a field written in a format of the CLI's own (``TYPE[:VERSIONS]`` for an OS check's
            operating systems): how the option's text becomes the value; derived from the spec when None.
        multiple: the option repeats (only with ``convert``, which receives the tuple of values).
        choices: the values ``convert`` accepts, when it takes a few words (``--enroll ott``).
    """

    name: str
    field: str
    help: str | None = None
    metavar: str | None = None
    convert: Converter | None = None
    multiple: bool = False
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class KindText:
    """The presentation of one kind: its collection (``service-policies``), its table columns (header and dotted
    path in a row), its flags in help order."""

    path: str
    columns: tuple[Column, ...]
    flags: tuple[FlagText, ...] = ()


_ID, _NAME = ("id", "id"), ("name", "name")
_ROLE_ATTRIBUTES = FlagText("role-attributes", "roleAttributes",
                            "role attributes, comma-separated (an empty text clears them)", "A,B")
_SEMANTIC = FlagText("semantic", "semantic", "how the roles combine")
_ROUTER_FLAGS = (FlagText("cost", "cost", "routing cost"),
                 FlagText("no-traversal", "noTraversal", "carry no traffic between other routers"),
                 FlagText("disabled", "disabled", "disabled"))

TABLE: tuple[KindText, ...] = (
    KindText("identities", (_ID, _NAME, ("type", "typeId"), ("admin", "isAdmin"), ("roles", "roleAttributes"),
                            ("auth policy", "authPolicy")), (
        FlagText("type", "type", "identity type"),
        FlagText("admin", "isAdmin", "administrator"),
        _ROLE_ATTRIBUTES,
        FlagText("auth-policy", "authPolicyId", "auth policy, by id or name", "POLICY"),
        FlagText("external-id", "externalId", "external id matched by certificate or JWT login", "ID"),
        FlagText("enroll", "enrollment", "create an enrolment: ott for a one-time token, updb for a password of "
                 "the name", convert=enrollment, choices=ENROLL_METHODS))),
    KindText("services", (_ID, _NAME, ("encryption", "encryptionRequired"), ("roles", "roleAttributes"),
                          ("configs", "configs"), ("strategy", "terminatorStrategy")), (
        FlagText("configs", "configs", "configs, comma-separated ids or names", "CONFIGS"),
        _ROLE_ATTRIBUTES,
        FlagText("encryption-required", "encryptionRequired", "end-to-end encryption required"),
        FlagText("terminator-strategy", "terminatorStrategy", "terminator strategy", "NAME"),
        FlagText("max-idle-time-millis", "maxIdleTimeMillis", "idle milliseconds before a circuit closes"))),
    KindText("service-policies", (_ID, _NAME, ("type", "type"), ("semantic", "semantic"),
                                  ("identities", "identityRoles"), ("services", "serviceRoles"),
                                  ("posture checks", "postureCheckRoles")), (
        FlagText("type", "type", "policy type: Dial lets identities use the services, Bind host them"),
        _SEMANTIC,
        FlagText("identity-roles", "identityRoles"),
        FlagText("service-roles", "serviceRoles"),
        FlagText("posture-check-roles", "postureCheckRoles"))),
    KindText("edge-routers", (_ID, _NAME, ("online", "isOnline"), ("verified", "isVerified"),
                              ("roles", "roleAttributes"), ("tunneler", "isTunnelerEnabled")), (
        _ROLE_ATTRIBUTES,
        FlagText("tunneler-enabled", "isTunnelerEnabled", "the router hosts a tunneler"),
        *_ROUTER_FLAGS)),
    KindText("edge-router-policies", (_ID, _NAME, ("semantic", "semantic"), ("edge routers", "edgeRouterRoles"),
                                      ("identities", "identityRoles")), (
        _SEMANTIC,
        FlagText("edge-router-roles", "edgeRouterRoles"),
        FlagText("identity-roles", "identityRoles"))),
    KindText("service-edge-router-policies", (_ID, _NAME, ("semantic", "semantic"),
                                              ("edge routers", "edgeRouterRoles"), ("services", "serviceRoles")), (
        _SEMANTIC,
        FlagText("edge-router-roles", "edgeRouterRoles"),
        FlagText("service-roles", "serviceRoles"))),
    KindText("routers", (_ID, _NAME, ("online", "isOnline"), ("verified", "isVerified"), ("cost", "cost")),
             _ROUTER_FLAGS),
    KindText("configs", (_ID, _NAME, ("config type", "configType")), (
        FlagText("config-type", "configTypeId", "config type, by id or name", "TYPE"),
        FlagText("data", "data", "the config's data: JSON or @FILE"))),
    KindText("config-types", (_ID, _NAME), (
        FlagText("schema", "schema", "JSON schema of the configs of this type: JSON or @FILE"),)),
    KindText("posture-checks", (_ID, _NAME, ("type", "typeId"), ("roles", "roleAttributes")), (
        FlagText("type", "typeId", "check type"),
        _ROLE_ATTRIBUTES,
        FlagText("os", "operatingSystems", "TYPE[:VERSION,...], repeatable, such as Windows:>=10.0.19041",
                 "TYPE[:VERSIONS]", operating_systems, multiple=True),
        FlagText("mac-addresses", "macAddresses", "MAC addresses, comma-separated", "MACS"),
        FlagText("domains", "domains", "Windows domains, comma-separated", "DOMAINS"),
        FlagText("os-type", "process.osType", "the process's OS type"),
        FlagText("path", "process.path", "the process's executable path", "PATH"),
        FlagText("hashes", "process.hashes", "accepted SHA-256 hashes of the executable, comma-separated",
                 "HASHES"),
        FlagText("signer-fingerprint", "process.signerFingerprint", "SHA-1 fingerprint of the signing certificate",
                 "FINGERPRINT"),
        FlagText("process", "processes", "OSTYPE:PATH[|hashes=H,...][|signers=F,...], repeatable", "SPEC",
                 processes, multiple=True),
        FlagText("semantic", "semantic", "which processes must run"),
        FlagText("timeout-seconds", "timeoutSeconds", "seconds an MFA pass lasts, -1 for ever"),
        FlagText("prompt-on-wake", "promptOnWake", "ask for MFA again after the device wakes"),
        FlagText("prompt-on-unlock", "promptOnUnlock", "ask for MFA again after an unlock"),
        FlagText("ignore-legacy-endpoints", "ignoreLegacyEndpoints",
                 "do not time out endpoints too old to report wake and unlock"))),
    KindText("authenticators", (_ID, ("method", "method"), ("identity", "identity"), ("username", "username"),
                                ("fingerprint", "fingerprint")), (
        FlagText("identity", "identityId", "the identity, by id or name", "IDENTITY"),
        FlagText("method", "method", "how the identity logs in: a password or a certificate"),
        FlagText("username", "username", "login name, for updb", "NAME"),
        FlagText("password", "password", "password, for updb", "PASSWORD"),
        FlagText("cert-pem", "certPem", "certificate PEM or @FILE, for cert", "PEM|@FILE", text_or_file))),
    KindText("enrollments", (_ID, ("method", "method"), ("identity", "identity"), ("expires", "expiresAt")), (
        FlagText("identity", "identityId", "the identity, by id or name", "IDENTITY"),
        FlagText("method", "method", "how the identity enrols"),
        FlagText("ca", "caId", "the CA of an ottca enrolment, by id or name", "CA"),
        FlagText("username", "username", "the username of an updb enrolment", "NAME"),
        FlagText("expires-at", "expiresAt", "when the enrolment expires, in RFC 3339", "TIME"))),
    KindText("cas", (_ID, _NAME, ("verified", "isVerified"), ("auth", "isAuthEnabled"),
                     ("auto enrol", "isAutoCaEnrollmentEnabled"), ("ott enrol", "isOttCaEnrollmentEnabled")), (
        FlagText("cert-pem", "certPem", "the CA certificate: PEM or @FILE", "PEM|@FILE", text_or_file),
        FlagText("identity-roles", "identityRoles", "role attributes given to the identities it enrols, "
                 "comma-separated", "A,B"),
        FlagText("auth-enabled", "isAuthEnabled", "its certificates may log in"),
        FlagText("auto-ca-enrollment", "isAutoCaEnrollmentEnabled", "enrol unknown certificates on first login"),
        FlagText("ott-ca-enrollment", "isOttCaEnrollmentEnabled", "allow ottca enrolments"),
        FlagText("identity-name-format", "identityNameFormat", "name of auto-enrolled identities", "FORMAT"))),
    KindText("external-jwt-signers", (_ID, _NAME, ("issuer", "issuer"), ("audience", "audience"),
                                      ("enabled", "enabled")), (
        FlagText("issuer", "issuer", "the tokens' iss claim", "ISSUER"),
        FlagText("audience", "audience", "the tokens' aud claim", "AUDIENCE"),
        FlagText("enabled", "enabled", "tokens of this signer may log in"),
        FlagText("cert-pem", "certPem", "the signing certificate: PEM or @FILE", "PEM|@FILE", text_or_file),
        FlagText("jwks-endpoint", "jwksEndpoint", "URL of the signer's key set", "URL"),
        FlagText("kid", "kid", "key id of the certificate", "KID"),
        FlagText("claims-property", "claimsProperty", "claim naming the identity", "CLAIM"),
        FlagText("use-external-id", "useExternalId", "match the claim to externalId instead of the id"),
        FlagText("external-auth-url", "externalAuthUrl", "where endpoints get tokens", "URL"))),
    KindText("terminators", (_ID, ("service", "service"), ("router", "router"), ("binding", "binding"),
                             ("address", "address"), ("cost", "cost")), (
        FlagText("service", "service", "the service, by id or name", "SERVICE"),
        FlagText("router", "router", "the router, by id or name", "ROUTER"),
        FlagText("binding", "binding", "binding: transport, edge...", "BINDING"),
        FlagText("address", "address", "address the router dials", "ADDRESS"),
        FlagText("cost", "cost", "cost of the path through it"),
        FlagText("precedence", "precedence", "how the router is chosen among others"))),
    KindText("auth-policies", (_ID, _NAME, ("updb", "primary.updb.allowed"), ("cert", "primary.cert.allowed"),
                               ("totp", "secondary.requireTotp")), (
        FlagText("primary", "primary", "the primary factors object: JSON or @FILE"),
        FlagText("secondary", "secondary", "the secondary factors object: JSON or @FILE"))),
    KindText("api-sessions", (_ID, ("identity", "identity"), ("ip", "ipAddress"),
                              ("last activity", "lastActivityAt"), ("mfa", "isMfaComplete"))),
    KindText("sessions", (_ID, ("type", "type"), ("identity", "identityId"), ("service", "service"),
                          ("api session", "apiSessionId"))),
    KindText("identity-types", (_ID, _NAME)),
    KindText("posture-check-types", (_ID, _NAME, ("operating systems", "operatingSystems"))),
)
"""Every listable kind in the order help lists them; a kind the controller serves but this table lacks is listed
after them with the columns ``id`` (and ``name``) and no flags."""
