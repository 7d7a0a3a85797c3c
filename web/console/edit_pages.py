"""Creating, editing and deleting rows of any kind from the console.

Forms are derived from the specs (:mod:`web.console.widgets`); a kind with variants (posture checks) has one form per
variant, chosen first. A submitted form becomes the body of the API's own operation, run through the same parts its
handler uses: :meth:`~controller.data.domain.Domain.create` (``POST /{kind}``), :meth:`~controller.data.domain.
Domain.replace` as a PATCH of every field the form shows (``PATCH /{kind}/{id}``), :meth:`~controller.data.domain.
Domain.delete`; a kind whose create is a route of its own (enrollments) goes through that route's part. Whatever the
domain refuses is shown with the API's message beside the field its cause names, and nothing is changed. A delete
first shows what refers to the row (:func:`web.console.reading.references_to`).

Without JavaScript, a repeatable group grows by one item with its "add" button, which shows the form again as typed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from quart import Blueprint, Response, request

from controller.authentication.enrollment_admin import create_enrollment
from controller.errors import ApiError
from controller.model.field import MISSING, Mode, Variant
from controller.model.request_fields import default_value, words
from controller.model.spec import Resource
from controller.runtime.composition import Controller
from web.console.form_values import Bound, Raw, bind, parse, place_error, to_form
from web.console.guard import current
from web.console.kind_pages import kind_label
from web.console.reading import StoreChoices, references_to
from web.console.rendering import api_message, page, see_other
from web.console.widgets import Widget, form_widgets

__all__ = ["OWN_CREATES", "register"]

Create = Callable[[Controller, Any], Awaitable[Mapping[str, Any]]]


async def _create_enrollment(controller: Controller, body: Any) -> Mapping[str, Any]:
    return await create_enrollment(controller, body)


OWN_CREATES: Mapping[str, Create] = {"enrollments": _create_enrollment}
"""Kinds whose ``POST /{kind}`` is a route of its own (``Resource.create_schema``), and the part that route calls."""


def _raw(form: Any) -> Raw:
    return {key: [str(v) for v in form.getlist(key)] for key in form}


def _creatable(resource: Resource) -> bool:
    return "create" in resource.operations or resource.kind in OWN_CREATES


def register(bp: Blueprint, controller: Controller, kinds: Sequence[str]) -> None:
    """Add the create, edit and delete pages of every kind in ``kinds`` to the console's blueprint."""
    registry = controller.registry
    domain = controller.domain
    kind_rule = "<any(" + ", ".join(f'"{kind}"' for kind in kinds) + "):kind>"

    def variant_of(resource: Resource, chosen: str | None) -> Variant | None:
        if resource.variants is None:
            return None
        variant = resource.variants.get(chosen)
        if variant is None:
            raise ApiError("NOT_FOUND")
        return variant

    async def show_form(resource: Resource, widgets: Sequence[Widget], bound: list[Bound], *, row_id: str | None,
                        variant: Variant | None, error: str = "", status: int = 200) -> Response:
        editing = row_id is not None
        title = f"New {words(resource.singular)}"
        if editing:
            with domain.read() as ctx:
                stored = ctx.txn.get(resource.kind, row_id or "")
            title = f"Edit {(stored or {}).get('name') or row_id}"
        if variant is not None:
            title += f" ({variant.value})"
        return await page("form.html", status, title=title, resource=resource, fields=bound,
                          error=error, editing=editing, row_id=row_id, label=kind_label)

    async def submitted(resource: Resource, widgets: Sequence[Widget], variant: Variant | None,
                        row_id: str | None) -> Response:
        form = await request.form
        raw = _raw(form)
        choices = StoreChoices(domain)
        adding = str(form.get("_add", ""))
        if adding:
            raw[f"{adding}~count"] = [str(int((raw.get(f"{adding}~count") or ["1"])[0] or 1) + 1)]
            return await show_form(resource, widgets, bind(widgets, raw, {}, choices), row_id=row_id, variant=variant)
        body, errors = parse(widgets, raw, choices, editing=row_id is not None)
        if errors:
            return await show_form(resource, widgets, bind(widgets, raw, errors, choices), row_id=row_id,
                                   variant=variant, error="Some fields cannot be read: nothing was saved.",
                                   status=400)
        try:
            if row_id is not None:
                await domain.replace(resource.kind, row_id, body, Mode.PATCH)
                target = row_id
            elif resource.kind in OWN_CREATES:
                target = str((await OWN_CREATES[resource.kind](controller, body))["id"])
            else:
                target = str((await domain.create(resource.kind, body))["id"])
        except ApiError as refused:
            bound = bind(widgets, raw, {}, choices)
            cause = refused.cause or {}
            field, value = cause.get("field"), cause.get("value")
            given = f" (given: {value})" if value not in (None, "", "<nil>") else ""
            placed = isinstance(field, str) and place_error(bound, field, api_message(refused) + given)
            return await show_form(resource, widgets, bound, row_id=row_id, variant=variant,
                                   error=("Not saved: " + (refused.message if placed else api_message(refused))),
                                   status=refused.status)
        shown = body.get("name") or target
        current().session.messages.append(f"{'Saved' if row_id else 'Created'} {words(resource.singular)} {shown}.")
        return see_other(f"/console/{resource.kind}/{target}")

    def defaults(resource: Resource, widgets: Sequence[Widget], variant: Variant | None) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for w in widgets:
            f = resource.field(w.name)
            value = default_value(f) if f is not None else MISSING
            if value is not MISSING and value is not None:
                values[w.name] = value
        if resource.variants is not None and variant is not None:
            values[resource.variants.discriminator] = variant.value
        return values

    @bp.get(f"/{kind_rule}/new")
    async def create_page(kind: str) -> Response:
        resource = registry[kind]
        if not _creatable(resource):
            raise ApiError("METHOD_NOT_ALLOWED")
        if resource.variants is not None and not request.args.get(resource.variants.discriminator):
            return await page("variants.html", title=f"New {words(resource.singular)}", resource=resource,
                              discriminator=resource.variants.discriminator, variants=resource.variants.variants,
                              label=kind_label)
        variant = variant_of(resource, request.args.get(resource.variants.discriminator)
                             if resource.variants else None)
        widgets = form_widgets(resource, Mode.CREATE, variant)
        raw = to_form(widgets, defaults(resource, widgets, variant))
        return await show_form(resource, widgets, bind(widgets, raw, {}, StoreChoices(domain)), row_id=None,
                               variant=variant)

    @bp.post(f"/{kind_rule}/new")
    async def create_submit(kind: str) -> Response:
        resource = registry[kind]
        if not _creatable(resource):
            raise ApiError("METHOD_NOT_ALLOWED")
        chosen = (await request.form).get(resource.variants.discriminator) if resource.variants else None
        variant = variant_of(resource, chosen)
        return await submitted(resource, form_widgets(resource, Mode.CREATE, variant), variant, None)

    def stored(resource: Resource, row_id: str) -> tuple[dict[str, Any], Variant | None]:
        if "patch" not in resource.operations:
            raise ApiError("METHOD_NOT_ALLOWED")
        with domain.read() as ctx:
            row = ctx.txn.get(resource.kind, row_id)
        if row is None:
            raise ApiError("NOT_FOUND")
        variant = variant_of(resource, row.get(resource.variants.discriminator)) if resource.variants else None
        return row, variant

    @bp.get(f"/{kind_rule}/<id>/edit")
    async def edit_page(kind: str, id: str) -> Response:
        resource = registry[kind]
        row, variant = stored(resource, id)
        widgets = form_widgets(resource, Mode.PATCH, variant)
        return await show_form(resource, widgets, bind(widgets, to_form(widgets, row), {}, StoreChoices(domain)),
                               row_id=id, variant=variant)

    @bp.post(f"/{kind_rule}/<id>/edit")
    async def edit_submit(kind: str, id: str) -> Response:
        resource = registry[kind]
        _, variant = stored(resource, id)
        return await submitted(resource, form_widgets(resource, Mode.PATCH, variant), variant, id)

    async def confirmation(resource: Resource, row_id: str, error: str = "", status: int = 200) -> Response:
        if "delete" not in resource.operations:
            raise ApiError("METHOD_NOT_ALLOWED")
        row = domain.detail(resource.kind, row_id)
        return await page("delete.html", status, title=f"Delete {row.get('name') or row_id}?", resource=resource,
                          row=row, referrers=references_to(domain, resource.kind, row_id), error=error,
                          label=kind_label)

    @bp.get(f"/{kind_rule}/<id>/delete")
    async def delete_page(kind: str, id: str) -> Response:
        return await confirmation(registry[kind], id)

    @bp.post(f"/{kind_rule}/<id>/delete")
    async def delete_submit(kind: str, id: str) -> Response:
        resource = registry[kind]
        if "delete" not in resource.operations:
            raise ApiError("METHOD_NOT_ALLOWED")
        with domain.read() as ctx:
            row = ctx.txn.get(kind, id)
        try:
            await domain.delete(kind, id)
        except ApiError as refused:
            if refused.code == "NOT_FOUND":
                raise
            return await confirmation(resource, id, api_message(refused), refused.status)
        current().session.messages.append(f"Deleted {words(resource.singular)} {(row or {}).get('name') or id}.")
        return see_other(f"/console/{kind}")
