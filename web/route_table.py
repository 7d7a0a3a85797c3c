"""The route table: what each served operation is and who may call it, for the application and for the OpenAPI
generator.

An operation's :class:`RouteInfo` declares its access level, and that declaration is the check: :meth:`Routes.add`
serves every handler behind :func:`web.guards.admit` for that level, so what the OpenAPI document states is what
is enforced, and no operation can be served without a level.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from quart import Blueprint, Response, g

from controller.model.events import AUTHOR, Author
from controller.runtime.composition import Controller
from web.guards import Access, admit

__all__ = ["Handler", "RouteGroup", "RouteInfo", "Routes"]


@dataclass(frozen=True, slots=True)
class RouteInfo:
    """One served operation: where it is, who may call it, and what the OpenAPI generator says about it.

    Every field after ``tag`` is keyword-only; ``access`` has no default, so every operation states its level.
    """

    api: str  # "management" or "client"
    method: str
    path: str  # with {id} placeholders, relative to the API base path
    operation_id: str
    tag: str
    _: KW_ONLY
    access: Access
    kind: str | None = None  # resource kind for generic operations
    action: str | None = None  # list/create/detail/update/patch/delete/association/role-attributes
    target: str | None = None  # target kind of an association
    summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # What the OpenAPI document says about a custom operation; generic ones (``kind`` set) derive all of this from
    # the resource spec.
    body: Mapping[str, Any] | None = None  # JSON schema of the request body
    body_optional: bool = False  # the body may be left out (a DELETE whose absent body means "all")
    data: Mapping[str, Any] | None = None  # JSON schema of the answer's ``data`` (of the whole answer when raw)
    status: int = 200  # status of a successful answer
    query: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> schema, plus "required": True
    paged: bool = False  # takes the list parameters (limit, offset, filter, sort)
    produces: str = "application/json"  # media type(s) of a successful answer, comma-separated
    consumes: str = "application/json"  # media type(s) the body may come as, comma-separated
    raw: bool = False  # the answer is the bare ``data`` value, not wrapped in the envelope
    headers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # header parameters, as ``query``
    # Statuses of the error answers the operation gives beyond those web.openapi derives for every operation (400
    # with parameters or a body, 401 with a session, 404 with a path id, 413 with a body).
    errors: tuple[int, ...] = ()

    @property
    def admin(self) -> bool:
        """The operation needs an administrator's session."""
        return self.access is Access.ADMIN

    @property
    def session(self) -> bool:
        """The operation needs a ``zt-session`` header (a partial session's counts); ``admin`` implies it."""
        return self.access is not Access.ANYONE


Handler = Callable[..., Awaitable[Response]]


class Routes(list[RouteInfo]):
    """The operations one application serves, in registration order (the OpenAPI generator reads it).

    Args:
        controller: whose sessions and identities the access checks of every operation consult.
    """

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self._controller = controller

    def add(self, bp: Blueprint, info: RouteInfo, handler: Handler) -> None:
        """Serve ``handler`` on ``bp`` at ``info.method`` and ``info.path`` (endpoint ``info.operation_id``) and
        record ``info``.

        The handler runs only for callers :func:`web.guards.admit` lets in at ``info.access``, and reads their
        session with :func:`web.guards.current_session`; every other caller gets 401 UNAUTHORIZED before the
        handler (and so before its body is read or validated). The handler is called with the path's values as
        keyword arguments; the writes it queues name its caller's session as their author
        (:data:`controller.model.events.AUTHOR`).
        """
        controller = self._controller
        access = info.access

        async def guarded(**path_values: str) -> Response:
            admit(controller, access)
            session = g.get("session")
            # The writes the handler queues are this session's (their events name it), until the handler returns.
            token = AUTHOR.set(Author(session.identity_id, session.id) if session is not None else None)
            try:
                return await handler(**path_values)
            finally:
                AUTHOR.reset(token)

        rule = info.path.replace("{", "<").replace("}", ">")
        bp.add_url_rule(rule, endpoint=info.operation_id, view_func=guarded, methods=[info.method])
        self.append(info)


class RouteGroup:
    """The operations of one route group on one API, each added with the one signature of :meth:`add`.

    Args:
        routes: the table the operations go into.
        bp: the blueprint of the API (its base path).
        api: ``"management"`` or ``"client"``.
        tag: the OpenAPI tag of the group's operations, unless one says otherwise.
        access: who may call the group's operations, unless one says otherwise.
    """

    def __init__(self, routes: Routes, bp: Blueprint, api: str, *, tag: str, access: Access) -> None:
        self._routes = routes
        self._bp = bp
        self.api = api
        self._tag = tag
        self._access = access

    def add(self, method: str, path: str, operation_id: str, handler: Handler, *, tag: str | None = None,
            access: Access | None = None, **details: Any) -> None:
        """Serve ``handler`` for ``method`` on ``path`` (relative to the API's base, ``{name}`` for path values) as
        the operation ``operation_id``; ``details`` are the other :class:`RouteInfo` fields (its summary, body and
        answer schemas, query parameters...)."""
        self._routes.add(self._bp, RouteInfo(self.api, method, path, operation_id, tag or self._tag,
                                             access=access or self._access, **details), handler)
