"""Terminators: where a service's traffic leaves the overlay (a router, a binding and an address).

Requests name the router and the service by id in ``router`` and ``service``; responses show those two as entity
refs and repeat the ids in ``routerId`` and ``serviceId``. Deleting the router or the service deletes its
terminators. The hosting identity's secret is accepted on create and kept only as a SHA-256 digest, never returned.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from typing import Any

from controller.errors import FieldError
from controller.model.field import CREATE_ONLY, PRECEDENCE, REQUIRED_CU, Field, Mode, int_field, string_field
from controller.model.spec import Hooks, ReadContext, Resource

__all__ = ["TERMINATORS"]

_SECRET_DIGEST = "_identitySecretSha256"


def _normalize(body: dict[str, Any], mode: Mode) -> dict[str, Any]:
    """Replace the clear identity secret by its digest before the body goes anywhere near storage."""
    secret = body.pop("identitySecret", None)
    if secret is not None and mode is Mode.CREATE:
        try:
            raw = base64.b64decode(secret, validate=True)
        except (binascii.Error, ValueError):
            raise FieldError("identitySecret", "identitySecret in body must be of type byte", secret) from None
        body[_SECRET_DIGEST] = hashlib.sha256(raw).hexdigest()
    return body


def _present(ctx: ReadContext, row: Mapping[str, Any], out: dict[str, Any]) -> None:
    out["routerId"] = row.get("router")
    out["serviceId"] = row.get("service")
    # No router reports load yet, so the dynamic cost is the static one.
    out["dynamicCost"] = row.get("cost", 0)


TERMINATORS = Resource(
    kind="terminators", singular="terminator", op_name="Terminator", op_plural="Terminators", tag="Terminator",
    body_name="terminator",
    fields=(
        string_field("service", required=REQUIRED_CU, ref="services", ref_name="service", on_delete="cascade"),
        string_field("router", required=REQUIRED_CU, ref="routers", ref_name="router", on_delete="cascade"),
        string_field("binding", required=REQUIRED_CU),
        string_field("address", required=REQUIRED_CU),
        int_field("cost", minimum=0, maximum=65535, default=0),
        PRECEDENCE,
        string_field("identity", writable=CREATE_ONLY, default=""),
        Field("identitySecret", {"type": "string", "format": "byte"}, writable=CREATE_ONLY, stored=False),
        Field(_SECRET_DIGEST, {"type": "string"}, writable=CREATE_ONLY),
    ),
    hooks=Hooks(normalize=_normalize, present=_present),
)
