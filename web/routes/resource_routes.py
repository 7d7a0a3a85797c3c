"""The standard routes of every registered kind, derived from its spec.

For each :class:`Resource`: list, create, detail, update (PUT), patch and delete as the spec enables them, the
association lists ``GET /{kind}/{id}/{path}``, and the kind's role-attributes list. Each is recorded in the
application's :class:`~web.route_table.Routes`, so the OpenAPI document describes exactly what is served. Access: the
standard operations need an admin when the kind is ``admin_only`` (a full session otherwise), an association list
as its own ``admin_only`` says, and role-attributes lists always need an admin.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, Response, request

from controller.errors import not_found
from controller.model.field import Mode
from controller.model.spec import Resource
from controller.runtime.composition import Controller
from web.envelope import created, empty, ok
from web.guards import Access
from web.request import list_params, read_json
from web.route_table import Handler, RouteGroup, Routes

__all__ = ["register_resource_routes"]


def _level(admin_only: bool) -> Access:
    return Access.ADMIN if admin_only else Access.SESSION


def register_resource_routes(bp: Blueprint, routes: Routes, controller: Controller, resource: Resource,
                             api: str) -> None:
    """Add the generic routes of one kind (and its aliases) to ``bp``."""
    for base in (resource.kind, *resource.aliases):
        op = resource.op_name if base == resource.kind else _camel(base)[:-1]
        ops = resource.op_plural if base == resource.kind else _camel(base)
        _register(bp, routes, controller, resource, api, base, op, ops)


def _camel(path: str) -> str:
    return "".join(part.capitalize() for part in path.split("-"))


def _register(bp: Blueprint, routes: Routes, controller: Controller, resource: Resource, api: str, base: str,
              op: str, ops: str) -> None:
    kind = resource.kind
    domain = controller.domain
    standard = _level(resource.admin_only)

    group = RouteGroup(routes, bp, api, tag=resource.tag, access=standard)

    if "list" in resource.operations:
        async def list_handler() -> Response:
            data, meta = domain.list_page(kind, list_params(resource.role_filter))
            return ok(data, meta)
        group.add("GET", f"/{base}", f"list{ops}", list_handler, kind=kind, action="list")

    if "create" in resource.operations:
        async def create_handler() -> Response:
            return created(await domain.create(kind, await read_json()))
        group.add("POST", f"/{base}", f"create{op}", create_handler, kind=kind, action="create")

    if "detail" in resource.operations:
        async def detail_handler(id: str) -> Response:
            return ok(domain.detail(kind, id))
        group.add("GET", f"/{base}/{{id}}", f"detail{op}", detail_handler, kind=kind, action="detail")

    if "update" in resource.operations:
        async def update_handler(id: str) -> Response:
            await domain.replace(kind, id, await read_json(), Mode.UPDATE)
            return empty()
        group.add("PUT", f"/{base}/{{id}}", f"update{op}", update_handler, kind=kind, action="update")

    if "patch" in resource.operations:
        async def patch_handler(id: str) -> Response:
            await domain.replace(kind, id, await read_json(), Mode.PATCH)
            return empty()
        group.add("PATCH", f"/{base}/{{id}}", f"patch{op}", patch_handler, kind=kind, action="patch")

    if "delete" in resource.operations:
        async def delete_handler(id: str) -> Response:
            await domain.delete(kind, id)
            return empty()
        group.add("DELETE", f"/{base}/{{id}}", f"delete{op}", delete_handler, kind=kind, action="delete")

    for association in controller.registry.associations(kind):
        target = controller.registry[association.target]

        def make(assoc: Any = association, target: Resource = target) -> Handler:
            async def association_handler(id: str) -> Response:
                with domain.read() as ctx:
                    row = ctx.txn.get(kind, id)
                    if row is None:
                        raise not_found(resource.singular, id)
                    ids = assoc.resolve(ctx, row)
                data, meta = domain.list_page(target.kind, list_params(False), ids)
                return ok(data, meta)
            return association_handler

        operation_id = association.operation_id or f"list{op}{_camel(association.path)}"
        group.add("GET", f"/{base}/{{id}}/{association.path}", operation_id, make(), kind=kind, action="association",
                  access=_level(association.admin_only), target=association.target)

    if resource.role_attributes_path and base == resource.kind:
        path = resource.role_attributes_path

        async def role_attributes_handler() -> Response:
            data, meta = domain.role_attributes(kind, request.args.get("filter"))
            return ok(data, meta)
        group.add("GET", f"/{path}", f"list{_camel(path)}", role_attributes_handler, kind=kind,
                  action="role-attributes", access=Access.ADMIN)


