"""The config types OpenZiti endpoints read, present in every data directory: ``intercept.v1``, ``host.v1``,
``host.v2``, ``ziti-tunneler-client.v1`` and ``ziti-tunneler-server.v1``.

Tunnelers and SDKs look these up by name and read the configs of these types from a service's ``config`` map, so a
network is only usable by them once the types exist. Each keeps the id the reference controller gives it, so that
scripts written against OpenZiti find them by id too. The schemas are draft 7 (what ``configs.py`` assumes for a
schema without ``$schema``) and are written for precise errors: no ``oneOf`` over formats, every list and object
closed, so that a refused config names the one field at fault (``data.portRanges[0].high``).

Addresses are checked loosely (a non-empty string without whitespace): an intercept address may be an IP, a CIDR,
a host name or a wildcard domain (``*.example.com``), and telling those apart is the endpoint's job, as in OpenZiti.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controller.data.write_path import create_row
from controller.model.spec import WriteContext

__all__ = ["SEEDED_CONFIG_TYPES", "SEEDED_META", "seed_config_types"]

_DRAFT = "http://json-schema.org/draft-07/schema#"
_PROTOCOL: dict[str, Any] = {"type": "string", "enum": ["tcp", "udp"]}
_PORT: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": 65535}
_TIMEOUT_SECONDS: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": 2147483647}
_ADDRESS: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 1024, "pattern": r"^\S+$"}
# A Go duration as the tunnelers parse it: whole numbers of hours, minutes, seconds or milliseconds.
_DURATION: dict[str, Any] = {"type": "string", "pattern": r"^([0-9]+(h|m|s|ms))+$"}
_PRECEDENCE: dict[str, Any] = {"type": "string", "enum": ["default", "required", "failed"]}
_ONLY_TRUE: dict[str, Any] = {"type": "boolean", "const": True}


def _closed(properties: Mapping[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    """An object schema that allows only ``properties``."""
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    schema.update(extra)
    return schema


def _set_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """A non-empty list of distinct ``item`` values."""
    return {"type": "array", "minItems": 1, "uniqueItems": True, "items": dict(item)}


_PORT_RANGE = _closed({"low": _PORT, "high": _PORT}, ("low", "high"))

# Health checks a hosting tunneler runs against the address it hosts (host.v1, ziti-tunneler-server.v1).
_CHECK_ACTION = _closed({
    "trigger": {"type": "string", "enum": ["fail", "pass", "change"]},
    "consecutiveEvents": {"type": "integer", "minimum": 0, "maximum": 65535},
    "duration": _DURATION,
    "action": {"type": "string",
               "pattern": r"^(mark (un)?healthy|increase cost [0-9]+|decrease cost [0-9]+|send event)$"},
}, ("trigger", "action"))
_CHECK_ACTIONS: dict[str, Any] = {"type": "array", "minItems": 1, "maxItems": 20, "items": _CHECK_ACTION}
_PORT_CHECK = _closed({"address": {"type": "string"}, "interval": _DURATION, "timeout": _DURATION,
                       "actions": _CHECK_ACTIONS}, ("interval", "timeout", "address"))
_HTTP_CHECK = _closed({
    "url": {"type": "string"}, "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH"]},
    "body": {"type": "string"}, "expectStatus": {"type": "integer", "minimum": 100, "maximum": 599},
    "expectInBody": {"type": "string"}, "interval": _DURATION, "timeout": _DURATION, "actions": _CHECK_ACTIONS,
}, ("interval", "timeout", "url"))
_HEALTH_CHECKS: dict[str, Any] = {"portChecks": {"type": "array", "items": _PORT_CHECK},
                                  "httpChecks": {"type": "array", "items": _HTTP_CHECK}}


def _translation(prefix_bits: int) -> dict[str, Any]:
    address = {"type": "string", "format": "ipv4" if prefix_bits == 32 else "ipv6"}
    return _closed({"from": address, "to": address,
                    "prefixLength": {"type": "integer", "minimum": 0, "maximum": prefix_bits}})


def _host_terminator_rules() -> list[dict[str, Any]]:
    """Each of protocol, address and port is either fixed or forwarded, and a forwarded one names what it allows.

    Written as one ``if``/``then``/``else`` per pair, so that a missing field is reported by name."""
    rules = []
    for fixed, forward, allowed in (("protocol", "forwardProtocol", "allowedProtocols"),
                                    ("address", "forwardAddress", "allowedAddresses"),
                                    ("port", "forwardPort", "allowedPortRanges")):
        rules.append({"if": {"properties": {forward: {"const": True}}, "required": [forward]},
                      "then": {"required": [allowed]}, "else": {"required": [fixed]}})
    return rules


# How a hosting tunneler dials the address it serves: a fixed protocol, address and port, or the ones the client
# intercepted ("forward"), limited to the allowed sets.
_HOST_TERMINATOR = _closed(
    {
        "protocol": _PROTOCOL,
        "forwardProtocol": _ONLY_TRUE,
        "allowedProtocols": _set_of(_PROTOCOL),
        "address": _ADDRESS,
        "forwardAddress": _ONLY_TRUE,
        "allowedAddresses": _set_of(_ADDRESS),
        "forwardAddressTranslations": _set_of({"anyOf": [_translation(32), _translation(128)]}),
        "port": _PORT,
        "forwardPort": _ONLY_TRUE,
        "allowedPortRanges": _set_of(_PORT_RANGE),
        "allowedSourceAddresses": _set_of(_ADDRESS),
        "listenOptions": _closed({
            "bindUsingEdgeIdentity": {"type": "boolean"},
            "bindUsingEdgeIdentityWildcard": {"type": "boolean"},
            "connectTimeout": _DURATION,
            "connectTimeoutSeconds": _TIMEOUT_SECONDS,
            "cost": {"type": "integer", "minimum": 0, "maximum": 65535},
            "identity": {"type": "string"},
            "maxConnections": {"type": "integer", "minimum": 1},
            "precedence": _PRECEDENCE,
        }),
        "proxy": _closed({"type": {"type": "string", "enum": ["http"]}, "address": {"type": "string"}},
                         ("type", "address")),
        **_HEALTH_CHECKS,
    },
    allOf=_host_terminator_rules(),
)

_INTERCEPT_V1 = _closed(
    {
        "protocols": _set_of(_PROTOCOL),
        "addresses": _set_of(_ADDRESS),
        "portRanges": _set_of(_PORT_RANGE),
        "dialOptions": _closed({"identity": {"type": "string"}, "connectTimeoutSeconds": _TIMEOUT_SECONDS}),
        "sourceIp": {"type": "string"},
        "allowedSourceAddresses": _set_of(_ADDRESS),
    },
    ("protocols", "addresses", "portRanges"),
)

_TUNNELER_CLIENT_V1 = _closed({"hostname": {"type": "string"}, "port": _PORT}, ("hostname", "port"))
_TUNNELER_SERVER_V1 = _closed({"protocol": {"type": ["string", "null"], "enum": ["tcp", "udp", None]},
                               "hostname": {"type": "string"}, "port": _PORT, **_HEALTH_CHECKS},
                              ("hostname", "port"))

SEEDED_CONFIG_TYPES: tuple[Mapping[str, Any], ...] = (
    {"id": "g7cIWbcGg", "name": "intercept.v1", "schema": {"$schema": _DRAFT, **_INTERCEPT_V1}},
    {"id": "NH5p4FpGR", "name": "host.v1", "schema": {"$schema": _DRAFT, **_HOST_TERMINATOR}},
    {"id": "host.v2", "name": "host.v2", "schema": {"$schema": _DRAFT, **_closed(
        {"terminators": {"type": "array", "minItems": 1, "items": _HOST_TERMINATOR}}, ("terminators",))}},
    {"id": "f2dd2df0-9c04-4b84-a91e-71437ac229f1", "name": "ziti-tunneler-client.v1",
     "schema": {"$schema": _DRAFT, **_TUNNELER_CLIENT_V1}},
    {"id": "cea49285-6c07-42cf-9f52-09a9b115c783", "name": "ziti-tunneler-server.v1",
     "schema": {"$schema": _DRAFT, **_TUNNELER_SERVER_V1}},
)
"""The seeded types: the reference controller's id, the name endpoints look for, and our schema of its data."""


SEEDED_META = "seededConfigTypes"
"""Store meta: the ids of the seeded config types already offered to this data directory."""


def seed_config_types(ctx: WriteContext) -> list[str]:
    """Create each seeded config type that is missing, through the write path (its schema is checked like any
    client's); returns the ids created.

    A type is left alone when a row has its id or its name: a data directory whose operator made an ``intercept.v1``
    of their own keeps it, and a restart creates nothing. Each type is offered once per data directory (the meta
    key :data:`SEEDED_META` remembers which): one the operator deleted stays deleted. Runs in the writer's
    transaction (bootstrap's seed).
    """
    resource = ctx.registry["config-types"]
    offered = set(ctx.txn.meta(SEEDED_META) or ())
    created = []
    for seeded in SEEDED_CONFIG_TYPES:
        if seeded["id"] in offered:
            continue
        offered.add(str(seeded["id"]))
        if ctx.txn.exists(resource.kind, seeded["id"]) or ctx.txn.by_unique(resource.kind, "name", seeded["name"]):
            continue
        # A copy: the stored row and the change record must not share the module's schema objects.
        body = {"name": seeded["name"], "schema": copy.deepcopy(dict(seeded["schema"]))}
        create_row(ctx, resource, body, None, row_id=seeded["id"])
        created.append(str(seeded["id"]))
    if offered != set(ctx.txn.meta(SEEDED_META) or ()):
        ctx.txn.set_meta(SEEDED_META, sorted(offered))
    return created
