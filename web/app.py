"""``create_app(controller)``: the quart-trio application serving both APIs and the web console (``/console/``).

Every request gets a request id, a size check on its body before any other work, the controller's read barrier (a
node of a cluster waits until it holds every write acknowledged before the request), the headers old SDKs rely on
(``ziti-instance-id``, ``server``), and one structured log line (method, path, status, duration, requestId). Secrets
never reach the log: only the path is logged, never a query string, header or body. A controller with metrics
(``controller/runtime/metrics.py``) also counts each request there, by route template, method and status.
"""

from __future__ import annotations

import logging
import secrets
import time

from quart import Blueprint, Response, g, request
from quart_trio import QuartTrio

from controller.data.freshness import AlwaysFresh
from controller.errors import ApiError
from controller.runtime.composition import VERSION, Controller
from web.client_certs import TlsExtension
from web.console import console_blueprint
from web.error_handlers import install_error_handlers, render_error
from web.guards import bring_ext_jwt_factor
from web.internal_channel import InternalChannel
from web.legacy_paths import LegacyPaths
from web.route_table import Routes
from web.routes.resource_routes import register_resource_routes
from web.url_rules import LazyBuilderRule

__all__ = ["CLIENT_BASE", "MANAGEMENT_BASE", "create_app"]

MANAGEMENT_BASE = "/edge/management/v1"
CLIENT_BASE = "/edge/client/v1"

log = logging.getLogger("tollgate.access")

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})


def create_app(controller: Controller) -> QuartTrio:
    """Build the application for one controller; routes derive from its registry."""
    from web.routes import (
        authenticator_routes,
        ca_routes,
        client_routes,
        controller_routes,
        database_routes,
        enrollment_routes,
        external_jwt_routes,
        identity_config_routes,
        identity_routes,
        info_routes,
        insight_routes,
        login_routes,
        mfa_routes,
        posture_routes,
        session_certificate_routes,
    )

    app = QuartTrio("tollgate")
    # Quart's documented middleware hook: __call__ goes through asgi_app, so the test client passes these too.
    app.asgi_app = LegacyPaths(TlsExtension(app.asgi_app), CLIENT_BASE)  # type: ignore[method-assign]
    router = controller.cluster.router if controller.cluster is not None else None
    if router is not None:  # a cluster node: the calls other nodes forward are answered before the app
        app.asgi_app = InternalChannel(  # type: ignore[method-assign]
            app.asgi_app, router, max_body=controller.settings.max_body_bytes, metrics=controller.metrics)
    app.url_rule_class = LazyBuilderRule
    app.config["MAX_CONTENT_LENGTH"] = controller.settings.max_body_bytes
    # A body that stops arriving for this long is answered 408 (see hypercorn_config in
    # controller/runtime/task_tree.py).
    app.config["BODY_TIMEOUT"] = controller.settings.read_timeout
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = True
    app.json.sort_keys = False  # type: ignore[attr-defined]
    install_error_handlers(app)
    metrics = controller.metrics

    @app.before_request
    async def start() -> Response | None:
        g.request_id = secrets.token_hex(6)
        g.started = time.perf_counter()
        length = request.content_length
        if length is not None and length > controller.settings.max_body_bytes:
            return render_error(ApiError("REQUEST_TOO_LARGE"))
        if length is None and request.method not in _BODYLESS:
            # A chunked body announces no size: read it now (Quart stops at MAX_CONTENT_LENGTH and raises 413),
            # so an oversized one is refused before the handler does anything. Reads carry no body; waiting for
            # one would cost every GET a trip through the body machinery.
            await request.get_data()
        return None

    freshness = controller.freshness
    if not isinstance(freshness, AlwaysFresh):  # a single node is always fresh: it pays for no hook

        @app.before_request
        async def fresh() -> None:
            # After the size check above (hooks run in registration order), before anything reads: in a cluster,
            # the node's replica then holds every write acknowledged anywhere before this request arrived. (A
            # forwarded call never gets here: web/internal_channel.py answers it, once the revision its sender
            # names is applied.)
            await freshness.wait_fresh()

    @app.before_request
    async def external_jwt_factor() -> None:
        # After the size check above (hooks run in registration order): a session owing an external JWT is
        # completed here by the request's bearer token, so the handler sees it fully authenticated.
        await bring_ext_jwt_factor(controller)

    @app.after_request
    async def finish(response: Response) -> Response:
        response.headers["ziti-instance-id"] = controller.instance_id
        response.headers["server"] = f"tollgate/{VERSION}"
        request_id = getattr(g, "request_id", "")
        elapsed = time.perf_counter() - getattr(g, "started", time.perf_counter())
        log.info("request", extra={"method": request.method, "path": request.path, "status": response.status_code,
                                   "duration_ms": round(elapsed * 1000, 3), "requestId": request_id})
        if metrics is not None:
            rule = request.url_rule
            metrics.request_done(rule.rule if rule is not None else None, request.method, response.status_code,
                                 elapsed)
        return response

    management = Blueprint("management", __name__, url_prefix=MANAGEMENT_BASE)
    client = Blueprint("client", __name__, url_prefix=CLIENT_BASE)
    routes = Routes(controller)
    for resource in controller.registry.resources.values():
        register_resource_routes(management, routes, controller, resource, "management")
    for api, bp in (("management", management), ("client", client)):
        login_routes.register(bp, routes, controller, api)
        info_routes.register(bp, routes, controller, api)
        mfa_routes.register(bp, routes, controller, api)
        enrollment_routes.register(bp, routes, controller, api)
        authenticator_routes.register(bp, routes, controller, api)
        ca_routes.register(bp, routes, controller, api)
        session_certificate_routes.register(bp, routes, controller, api)
        external_jwt_routes.register(bp, routes, controller, api)
        controller_routes.register(bp, routes, controller, api)
    identity_routes.register(management, routes, controller)
    identity_config_routes.register(management, routes, controller)
    database_routes.register(management, routes, controller)
    client_routes.register(client, routes, controller)
    posture_routes.register(management, routes, controller)
    posture_routes.register_client(client, routes, controller)
    insight_routes.register(management, routes, controller)
    app.extensions["tollgate_routes"] = routes
    app.register_blueprint(management)
    app.register_blueprint(client)
    app.register_blueprint(console_blueprint(controller))
    return app

