"""Services and service policies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.model.field import (
    ATTRIBUTES,
    CREATE_ONLY,
    NAME,
    REQUIRED_CU,
    SEMANTIC,
    Field,
    Mode,
    bool_field,
    int_field,
    role_field,
    string_field,
    string_list,
)
from controller.model.spec import Hooks, ReadContext, Resource
from controller.resources.configs import check_service_configs
from storage.zitiql import FieldType, Symbol

__all__ = ["SERVICES", "SERVICE_POLICIES"]


def _service_present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out.setdefault("config", {})
    out.setdefault("permissions", [])
    out.setdefault("postureQueries", [])


SERVICES = Resource(
    kind="services", singular="service", op_name="Service", op_plural="Services", tag="Service",
    body_name="service",
    fields=(
        NAME,
        bool_field("encryptionRequired", required=frozenset({Mode.CREATE}), writable=CREATE_ONLY, default=True),
        int_field("maxIdleTimeMillis", default=0),
        string_field("terminatorStrategy", default="smartrouting"),
        ATTRIBUTES,
        string_list("configs", default=list, indexed_set=True, ids_of="configs"),  # checked by check_service_configs
    ),
    role_attributes_path="service-role-attributes",
    role_filter=True,
    hooks=Hooks(validate=check_service_configs, present=_service_present),
    shapes_access=True,
)

_POLICY_TYPE_NUMBERS = {"Dial": 1, "Bind": 2}


def _type_number(row: Mapping[str, Any]) -> int:
    # The reference filters policy type as an integer (Dial=1, Bind=2).
    return _POLICY_TYPE_NUMBERS.get(str(row.get("type")), 0)


SERVICE_POLICIES = Resource(
    kind="service-policies", singular="servicePolicy", op_name="ServicePolicy", op_plural="ServicePolicies",
    tag="Service Policy", body_name="policy",
    fields=(
        NAME,
        Field("type", {"type": "string", "enum": ["Dial", "Bind"]}, required=REQUIRED_CU),
        SEMANTIC,
        role_field("identityRoles", "identities"),
        role_field("serviceRoles", "services"),
        role_field("postureCheckRoles", "posture-checks"),
    ),
    extra_filter_fields={"type": Symbol(FieldType.NUMBER, getter=_type_number)},
    shapes_access=True,
)
