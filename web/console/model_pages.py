"""The model file in the console: export it, and apply one with a preview of its plan first.

The format and the planning are the admin CLI's (``tollgate apply -f`` and ``tollgate export``,
``controller/admin/``), run here in process: the controller's current state is read through the domain
(:class:`web.console.reading.DomainRows` as the planner's :class:`~controller.admin.export.ModelRows`), the plan is
:func:`controller.admin.apply.plan`, and its requests (:func:`controller.admin.apply.requests`) go to the same
domain operations the API's create, PATCH and delete handlers call.

An uploaded file is parsed and planned and the plan shown as a diff; nothing changes until the apply, which plans
again and goes ahead only when the plan is still the one shown (else the new plan is shown instead). An apply stops
at the first change the domain refuses, and says which changes were made and why it stopped.
"""

from __future__ import annotations

from quart import Blueprint, Response, request

from controller.admin.apply import ApplyFailed, Change, Plan, plan, requests
from controller.admin.export import Current, dump_model, read_current
from controller.admin.model_file import ModelError, parse_model
from controller.data.domain import Domain
from controller.errors import ApiError
from controller.model.field import Mode
from controller.runtime.composition import Controller
from web.console.guard import current
from web.console.reading import DomainRows
from web.console.rendering import api_message, page
from web.console.sessions import PendingModel

__all__ = ["carry_out", "register"]


async def carry_out(domain: Domain, the_plan: Plan, state: Current) -> tuple[Change, ...]:
    """Make the plan's changes through ``domain``, in order; the changes made.

    Raises:
        ApplyFailed: the domain refused a change; those before it are made, none after it is tried.
    """
    done: list[Change] = []
    steps = requests(the_plan, state)
    answer: str | None = None
    while True:
        try:
            step = steps.send(answer)
        except StopIteration:
            return tuple(done)
        answer = None
        try:
            if step.action == "create":
                answer = str((await domain.create(step.kind, step.body or {}))["id"])
            elif step.action == "update":
                await domain.replace(step.kind, step.id or "", step.body or {}, Mode.PATCH)
            else:
                await domain.delete(step.kind, step.id or "")
        except ApiError as refused:
            raise ApplyFailed(tuple(done), step.change, refused) from refused
        done.append(step.change)


def register(bp: Blueprint, controller: Controller) -> None:
    """Add the model file's pages (``/console/model``) to the console's blueprint."""
    domain = controller.domain
    rows = DomainRows(domain)

    async def preview(text: str, prune: bool, note: str = "") -> Response:
        try:
            the_plan = plan(parse_model(text), read_current(rows), prune=prune)
        except ModelError as bad:
            current().session.pending_model = None
            return await page("model.html", 400, title="Model file", error=str(bad))
        lines = tuple(the_plan.lines())
        current().session.pending_model = PendingModel(text, prune, lines) if lines else None
        return await page("plan.html", title="Apply: the plan", changes=the_plan.changes, summary=the_plan.summary(),
                          empty=the_plan.empty, prune=prune, note=note)

    @bp.get("/model")
    async def model_page() -> Response:
        return await page("model.html", title="Model file", error="")

    @bp.post("/model/plan")
    async def model_plan() -> Response:
        files = await request.files
        form = await request.form
        upload = files.get("file")
        text = upload.read().decode("utf-8", "replace") if upload is not None and upload.filename else ""
        if not text.strip():
            text = str(form.get("text", ""))
        if not text.strip():
            return await page("model.html", 400, title="Model file", error="Choose a model file, or paste one.")
        return await preview(text, form.get("prune") == "on")

    @bp.post("/model/apply")
    async def model_apply() -> Response:
        session = current().session
        pending = session.pending_model
        if pending is None:
            return await page("model.html", 409, title="Model file",
                              error="There is no previewed plan to apply: upload the file again.")
        try:
            state = read_current(rows)
            the_plan = plan(parse_model(pending.text), state, prune=pending.prune)
        except ModelError as bad:
            session.pending_model = None
            return await page("model.html", 400, title="Model file", error=str(bad))
        if tuple(the_plan.lines()) != pending.plan_lines:
            return await preview(pending.text, pending.prune,
                                 note="The controller changed since the preview: this is the plan now. "
                                      "Nothing was changed.")
        session.pending_model = None
        try:
            done = await carry_out(domain, the_plan, state)
        except ApplyFailed as failed:
            assert isinstance(failed.error, ApiError)  # carry_out raises for the domain's refusals only
            return await page("applied.html", failed.error.status, title="Apply stopped", done=failed.done,
                              failed=failed.failed, error=api_message(failed.error))
        return await page("applied.html", title="Applied", done=done, failed=None, error="")

    @bp.get("/model/export")
    async def model_export() -> Response:
        text = dump_model(read_current(rows).exported())
        return Response(text, content_type="application/yaml; charset=utf-8",
                        headers={"Content-Disposition": 'attachment; filename="tollgate-model.yaml"'})
