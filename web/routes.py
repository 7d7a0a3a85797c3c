"""The route table: what each served operation is, for the application and for the OpenAPI generator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from quart import Blueprint, Response

__all__ = ["RouteInfo", "Routes"]


@dataclass(frozen=True, slots=True)
class RouteInfo:
    """What the OpenAPI generator needs to know about one served operation."""

    api: str  # "management" or "client"
    method: str
    path: str  # with {id} placeholders, relative to the API base path
    operation_id: str
    tag: str
    kind: str | None = None  # resource kind for generic operations
    action: str | None = None  # list/create/detail/update/patch/delete/association/role-attributes
    target: str | None = None  # target kind of an association
    admin: bool = True
    summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # What the OpenAPI document says about a custom operation; generic ones (``kind`` set) derive all of this from
    # the resource spec. ``admin`` implies ``session``.
    session: bool = True  # needs a zt-session header
    body: Mapping[str, Any] | None = None  # JSON schema of the request body
    data: Mapping[str, Any] | None = None  # JSON schema of the answer's ``data`` (of the whole answer when raw)
    status: int = 200  # status of a successful answer
    query: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> schema, plus "required": True
    paged: bool = False  # takes the list parameters (limit, offset, filter, sort)
    produces: str = "application/json"  # media type(s) of a successful answer, comma-separated
    raw: bool = False  # the answer is the bare ``data`` value, not wrapped in the envelope


class Routes(list[RouteInfo]):
    """The operations one application serves, in registration order (the OpenAPI generator reads it)."""

    def add(self, bp: Blueprint, info: RouteInfo, handler: Callable[..., Awaitable[Response]]) -> None:
        rule = info.path.replace("{", "<").replace("}", ">")
        bp.add_url_rule(rule, endpoint=info.operation_id, view_func=handler, methods=[info.method])
        self.append(info)
