"""Per-identity service config overrides: for one identity, use this config instead of the service's own config of
the same type (``/identities/{id}/service-configs``).

Each override is a row of its own kind, ``service-configs``: the identity, the service, the config and the config's
type. An identity has at most one override per service and config type; assigning another config of that type
replaces it, as in the reference controller. The rows reference their identity, service and config with
``on_delete="cascade"``, so deleting any of the three removes the overrides that name it through the single write
path; the config type needs no reference, since a type in use by a config cannot be deleted and a config never
changes type.

The Client API shows the overrides in an identity's service list and detail: in each service's ``configs`` the
override takes the place of the service's config of the same type, and the ``config`` map (config type name ->
data, for the config types the API session asked for) carries the override's data. Every assignment or removal
stamps the identity, so that the ``service-updates`` poll tells its endpoints to fetch their services again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from controller.clock import format_time
from controller.data.present import entity_ref
from controller.data.write_path import create_row, delete_row, put_row
from controller.errors import ApiError, FieldError, field_cause, not_found
from controller.model.field import CREATE_ONLY, Field, Mode, string_field
from controller.model.spec import ReadContext, Resource, WriteContext
from controller.model.validation import SchemaCheck
from storage.store import ReadTxn

if TYPE_CHECKING:
    from controller.data.domain import Domain

__all__ = [
    "ASSIGN_SCHEMA",
    "CHANGED_AT",
    "CHANGED_AT_FIELD",
    "DETAIL_SCHEMA",
    "KIND",
    "SERVICE_CONFIGS",
    "apply_service_configs",
    "assign_service_configs",
    "list_service_configs",
    "remove_service_configs",
    "service_configs_changed_at",
    "wanted_config_types",
]

KIND = "service-configs"
"""The storage kind of the overrides."""

CHANGED_AT = "_serviceConfigsChangedAt"
"""The identity field stamped by every change to its overrides (internal: never shown)."""

CHANGED_AT_FIELD = Field(CHANGED_AT, {"type": "string", "format": "date-time"}, writable=frozenset())
"""Its declaration, for the identity spec."""

_KEY = ("identityId", "serviceId", "configTypeId")
_ENTITY_REF: dict[str, Any] = {"type": "object", "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "entity": {"type": "string"}, "_links": {"type": "object"}}}
_PAIR: dict[str, Any] = {"type": "object", "required": ["serviceId", "configId"],
                         "properties": {"serviceId": {"type": "string"}, "configId": {"type": "string"}}}

ASSIGN_SCHEMA: dict[str, Any] = {"type": "array", "items": _PAIR}
"""The body of both ``POST`` and ``DELETE /identities/{id}/service-configs``: (service, config) pairs."""

DETAIL_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["serviceId", "service", "configId", "config"],
    "properties": {"serviceId": {"type": "string"}, "service": _ENTITY_REF, "configId": {"type": "string"},
                   "config": _ENTITY_REF}}
"""One override as ``GET /identities/{id}/service-configs`` lists it."""

_ASSIGN_CHECK = SchemaCheck.of(ASSIGN_SCHEMA)

SERVICE_CONFIGS = Resource(
    kind=KIND, singular="serviceConfig", op_name="ServiceConfig", op_plural="ServiceConfigs", tag="Identity",
    body_name="serviceConfigs",
    fields=(
        string_field("identityId", writable=CREATE_ONLY, ref="identities", on_delete="cascade"),
        string_field("serviceId", writable=CREATE_ONLY, ref="services", ref_name="service", on_delete="cascade"),
        string_field("configId", ref="configs", ref_name="config", on_delete="cascade"),
        string_field("configTypeId", writable=CREATE_ONLY),
    ),
    # Written only by the functions below and shown only under the identity: no generic routes.
    operations=frozenset(),
    indexes=(_KEY,),
)


def _pairs(body: Any, name: str, *, required: bool) -> list[tuple[str, str]]:
    """The (serviceId, configId) pairs of a request body, in order.

    Raises:
        ApiError: 400 COULD_NOT_VALIDATE when the body is absent although ``required``, or is not a list of
            objects with string ``serviceId`` and ``configId``; the cause names the field (``name[1].configId``).
    """
    if body is None:
        if required:
            raise ApiError("COULD_NOT_VALIDATE", field_cause(name, f"{name} in body is required", None))
        return []
    _ASSIGN_CHECK.validate(body, name)
    return [(str(pair["serviceId"]), str(pair["configId"])) for pair in body]


def _require_identity(ctx: ReadContext, identity_id: str) -> dict[str, Any]:
    identity = ctx.txn.get("identities", identity_id)
    if identity is None:
        raise not_found("identity", identity_id)
    return identity


def _stamp(ctx: WriteContext, identity: dict[str, Any]) -> None:
    """Record on the identity that its overrides changed (its visible fields, ``updatedAt`` included, stay)."""
    put_row(ctx, ctx.registry["identities"], {**identity, CHANGED_AT: format_time(ctx.now)}, identity, Mode.PATCH)


def _assign(ctx: WriteContext, identity_id: str, pairs: list[tuple[str, str]]) -> None:
    identity = _require_identity(ctx, identity_id)
    resource = ctx.registry[KIND]
    chosen: dict[tuple[str, str], str] = {}
    changed = False
    for service_id, config_id in pairs:
        if not ctx.txn.exists("services", service_id):
            raise not_found("service", service_id)
        config = ctx.txn.get("configs", config_id)
        if config is None:
            raise not_found("config", config_id)
        type_id = str(config["configTypeId"])
        earlier = chosen.setdefault((service_id, type_id), config_id)
        if earlier != config_id:
            type_name = (ctx.txn.get("config-types", type_id) or {}).get("name", type_id)
            raise FieldError("serviceConfigs", f"configs {earlier} and {config_id} have the same config type "
                             f"{type_name}; an identity may override only one config of each type per service",
                             service_id)
        current = ctx.txn.get_many(KIND, ctx.txn.ids_by_fields(KIND, _KEY, (identity_id, service_id, type_id)))
        if not current:
            create_row(ctx, resource, {"identityId": identity_id, "serviceId": service_id, "configId": config_id,
                                       "configTypeId": type_id}, None)
            changed = True
        elif current[0]["configId"] != config_id:
            old = current[0]
            put_row(ctx, resource, {**old, "configId": config_id, "updatedAt": format_time(ctx.now)}, old,
                    Mode.UPDATE)
            changed = True
    if changed:
        _stamp(ctx, identity)


def _remove(ctx: WriteContext, identity_id: str, pairs: list[tuple[str, str]]) -> None:
    identity = _require_identity(ctx, identity_id)
    resource = ctx.registry[KIND]
    wanted = set(pairs)
    removed = False
    for row in ctx.txn.get_many(KIND, ctx.txn.ids_by_ref(KIND, "identityId", identity_id)):
        if not wanted or (row["serviceId"], row["configId"]) in wanted:
            delete_row(ctx, resource, row["id"])
            removed = True
    if removed:
        _stamp(ctx, identity)


async def assign_service_configs(domain: Domain, identity_id: str, body: Any) -> None:
    """``POST /identities/{id}/service-configs``: make each listed config the identity's override for its service.

    An override of the same service and config type is replaced; assigning what is already assigned changes
    nothing. All or nothing: the first failure leaves every override as it was.

    Raises:
        ApiError: 400 COULD_NOT_VALIDATE for a missing or malformed body, or for two configs of one type for one
            service in the same body; 404 NOT_FOUND for an unknown identity, service or config.
    """
    pairs = _pairs(body, "serviceConfigs", required=True)
    await domain.write(lambda ctx: _assign(ctx, identity_id, pairs))


async def remove_service_configs(domain: Domain, identity_id: str, body: Any) -> None:
    """``DELETE /identities/{id}/service-configs``: remove the identity's overrides matching the listed (service,
    config) pairs, or all of them for an empty list (what a request without a body reads as). Pairs that match
    nothing are ignored.

    Raises:
        ApiError: 400 COULD_NOT_VALIDATE for a malformed body (None, a JSON null, included); 404 NOT_FOUND for an
            unknown identity.
    """
    pairs = _pairs(body, "serviceConfigIdPairs", required=True)
    await domain.write(lambda ctx: _remove(ctx, identity_id, pairs))


def list_service_configs(domain: Domain, identity_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``GET /identities/{id}/service-configs``: every override of the identity (in service, then config type
    order), each as :data:`DETAIL_SCHEMA`, and the list ``meta`` (one page holding them all, as the reference).

    Raises:
        ApiError: 404 NOT_FOUND for an unknown identity.
    """
    with domain.read() as ctx:
        _require_identity(ctx, identity_id)
        rows = ctx.txn.get_many(KIND, ctx.txn.ids_by_ref(KIND, "identityId", identity_id))
        rows.sort(key=lambda row: (row["serviceId"], row["configTypeId"]))
        items = [{"serviceId": row["serviceId"], "service": entity_ref(ctx, "services", row["serviceId"]),
                  "configId": row["configId"], "config": entity_ref(ctx, "configs", row["configId"])}
                 for row in rows]
    meta = {"filterableFields": [], "pagination": {"limit": len(items), "offset": 0, "totalCount": len(items)}}
    return items, meta


def service_configs_changed_at(ctx: ReadContext, identity_id: str) -> str | None:
    """When the identity's overrides last changed (RFC 3339), or None if they never have."""
    identity = ctx.txn.get("identities", identity_id) or {}
    changed: str | None = identity.get(CHANGED_AT)
    return changed


def wanted_config_types(txn: ReadTxn, session_types: Iterable[Any], requested: Iterable[str]) -> frozenset[str]:
    """The config types whose data a client's service list carries: ``requested`` (names or ids, each entry
    possibly a comma-separated list) when it names any, else the API session's own (ids, from its login).

    Unknown names are dropped; ``all`` stands for every type and is kept as it is.
    """
    names = [part.strip() for entry in requested for part in entry.split(",") if part.strip()]
    if not names:
        return frozenset(str(t) for t in session_types)
    wanted = set()
    for name in names:
        if name == "all" or txn.exists("config-types", name):
            wanted.add(name)
        elif (type_id := txn.by_unique("config-types", "name", name)) is not None:
            wanted.add(type_id)
    return frozenset(wanted)


def _overrides(ctx: ReadContext, identity_id: str) -> dict[str, dict[str, str]]:
    """service id -> config type id -> the identity's override config id."""
    found: dict[str, dict[str, str]] = {}
    for row in ctx.txn.get_many(KIND, ctx.txn.ids_by_ref(KIND, "identityId", identity_id)):
        found.setdefault(row["serviceId"], {})[row["configTypeId"]] = row["configId"]
    return found


def apply_service_configs(ctx: ReadContext, identity_id: str, services: list[dict[str, Any]],
                          wanted: frozenset[str]) -> None:
    """Set ``configs`` and ``config`` of presented services as the identity sees them.

    ``configs``: the service's config ids, each override in the place of the service's config of its type (an
    override of a type the service lacks comes last). ``config``: config type name -> data of those configs, for
    the types in ``wanted`` (every type with ``all``; none when empty).
    """
    overrides = _overrides(ctx, identity_id)
    wants_all = "all" in wanted
    for service in services:
        own_ids = [str(i) for i in service.get("configs") or []]
        by_type: dict[str, str] = {}
        configs = {c["id"]: c for c in ctx.txn.get_many("configs", own_ids)}
        for config_id in own_ids:
            if config_id in configs:
                by_type[str(configs[config_id]["configTypeId"])] = config_id
        by_type.update(overrides.get(service["id"], {}))
        service["configs"] = list(by_type.values())
        shown = {type_id: config_id for type_id, config_id in by_type.items() if wants_all or type_id in wanted}
        service["config"] = _config_map(ctx, shown, configs)


def _config_map(ctx: ReadContext, shown: Mapping[str, str], loaded: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """config type name -> data, for (type id -> config id) ``shown``; ``loaded`` holds configs already read."""
    missing = [c for c in shown.values() if c not in loaded]
    configs = {**loaded, **{c["id"]: c for c in ctx.txn.get_many("configs", missing)}}
    types = {t["id"]: t for t in ctx.txn.get_many("config-types", list(shown))}
    return {str(types[type_id]["name"]): configs[config_id].get("data") or {}
            for type_id, config_id in shown.items() if type_id in types and config_id in configs}
