"""The admin FastAPI app: API, page, ``/healthz`` and ``/metrics``, behind the admin token.

``create_app(store, token=...)`` wires the parts; the caller owns the store's database
(see :mod:`gateway.admin.server` for the process that serves it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException

from agent.context_engine import ContextEngine
from agent.errors import HygieiaError, NotFound, StoreError
from gateway.admin.actions import AdminActions, Unavailable
from gateway.admin.api import api_router
from gateway.admin.api_actions import actions_api_router, export_router
from gateway.admin.api_overrides import overrides_api_router
from gateway.admin.api_usage import usage_router
from gateway.admin.dead_letters import dead_letter_router
from gateway.admin.errors import BadRequest, Conflict
from gateway.admin.metrics import CONTENT_TYPE, AdminMetrics
from gateway.admin.middleware import AccessLog, AdminAuth, FailedLogins, check_admin_token, erase_key
from gateway.admin.overrides import KnownModel, OverrideActions, table_model
from gateway.admin.page import esc, layout
from gateway.admin.scheduler_api import scheduler_metrics, scheduler_router
from gateway.admin.tool_calls import tool_call_metrics
from gateway.admin.views import html, page_router
from gateway.admin.views import usage_router as usage_page_router
from gateway.admin.views_actions import actions_router
from gateway.admin.views_overrides import overrides_router
from gateway.cluster.view import cluster_metrics, cluster_view
from gateway.config import ChatOverride
from gateway.store.repository import Store

_log = logging.getLogger(__name__)


def _answer(request: Request, message: str, status_code: int) -> Response:
    """JSON for the API and programs; an HTML page (same message) for the pages a browser reads."""
    path = request.url.path
    if path.startswith("/api/") or path in ("/metrics", "/healthz"):
        return JSONResponse({"error": message}, status_code=status_code)
    body = layout("error", f'<h1>{status_code}</h1><p class="error">{esc(message)}</p>')
    return html(body, status_code=status_code)


async def error_response(request: Request, exc: Exception) -> Response:
    """The one place our errors become HTTP: NotFound 404, bad input 400, a conflict 409,
    the database 503, the rest 500."""
    if isinstance(exc, NotFound):
        return _answer(request, str(exc), 404)
    if isinstance(exc, BadRequest | Conflict):
        return _answer(request, str(exc), 400 if isinstance(exc, BadRequest) else 409)
    if isinstance(exc, Unavailable):
        return _answer(request, str(exc), 503)
    if isinstance(exc, StoreError | SQLAlchemyError):
        _log.warning("admin %s %s: database error: %s", request.method, request.url.path, exc)
        return _answer(request, "the database is unavailable; try again shortly", 503)
    _log.error("admin %s %s failed: %s", request.method, request.url.path, exc)
    return _answer(request, "internal error", 500)


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error.get("loc", ())[1:]) or "request"
    return f"{where}: {error.get('msg', 'invalid value')}"


async def bad_request(request: Request, exc: Exception) -> Response:
    """A parameter that does not validate is 400 with what is wrong in one line (not FastAPI's 422)."""
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(_problem(e) for e in exc.errors()[:3])
    return _answer(request, problems or "bad request", 400)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (unknown route, wrong method) in the same ``{"error": ...}`` shape."""
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


def create_app(
    store: Store,
    *,
    token: str,
    engine: ContextEngine | None = None,
    context_window: Callable[[str], int] | None = None,
    failed_logins: FailedLogins | None = None,
    budget: Callable[[str], int | None] | None = None,
    known_model: KnownModel | None = None,
    config_overrides: Sequence[ChatOverride] = (),
) -> FastAPI:
    """The admin app over ``store``; every route but ``/healthz`` needs ``token`` (ConfigError when weak).

    ``engine``, ``context_window`` (a model's window) and ``budget`` (its context budget) let it
    compact sessions on request. ``known_model`` says whether a model name may be set as a chat's
    override (default: the model table); ``config_overrides`` are the config's ``overrides:``,
    shown beside the admin-set ones.
    """
    token = check_admin_token(token)
    app = FastAPI(title="Hygieia admin", docs_url=None, redoc_url=None, openapi_url="/api/openapi.json")
    metrics = AdminMetrics()

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        ok = await store.ping()
        return JSONResponse({"ok": ok}, status_code=200 if ok else 503)

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        body = metrics.render(
            await store.store_totals(), await store.strategy_totals(), await store.cache_misses()
        )
        body += await scheduler_metrics(store)
        body += await cluster_metrics(store)
        body += await tool_call_metrics(store)
        return Response(body, media_type=CONTENT_TYPE)

    actions = AdminActions(store, engine, context_window, budget)
    overrides = OverrideActions(store, known_model or table_model, tuple(config_overrides))
    app.include_router(api_router(store))
    app.include_router(actions_api_router(actions))
    app.include_router(export_router(store))
    app.include_router(usage_router(store))
    app.include_router(scheduler_router(store))

    @app.get("/api/cluster")
    async def cluster() -> JSONResponse:
        """Nodes (heartbeats), which node leads which intake, and which sessions are served where."""
        return JSONResponse(await cluster_view(store))

    app.include_router(dead_letter_router(store))
    app.include_router(page_router(store))
    app.include_router(actions_router(actions, confirm_key=erase_key(token)))
    app.include_router(usage_page_router(store))
    app.include_router(overrides_api_router(overrides))
    app.include_router(overrides_router(overrides))
    app.add_exception_handler(HygieiaError, error_response)
    app.add_exception_handler(SQLAlchemyError, error_response)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, bad_request)
    app.add_middleware(AdminAuth, token=token, failed_logins=failed_logins)
    app.add_middleware(AccessLog)  # outermost: logs 401s too
    return app
