"""The admin FastAPI app: API, page, ``/healthz`` and ``/metrics``, behind the admin token.

``create_app(store, token=...)`` wires the parts; the caller owns the store's database
(see :mod:`gateway.admin.server` for the process that serves it).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException

from agent.errors import HygieiaError, NotFound, StoreError
from gateway.admin.api import api_router
from gateway.admin.metrics import CONTENT_TYPE, AdminMetrics
from gateway.admin.middleware import AccessLog, AdminAuth
from gateway.admin.scheduler_api import scheduler_metrics, scheduler_router
from gateway.admin.views import page_router
from gateway.store.repository import Store

_log = logging.getLogger(__name__)


async def error_response(request: Request, exc: Exception) -> Response:
    """The one place our errors become HTTP: NotFound 404, the database 503, the rest 500."""
    if isinstance(exc, NotFound):
        return JSONResponse({"error": str(exc)}, status_code=404)
    if isinstance(exc, StoreError | SQLAlchemyError):
        _log.warning("admin %s %s: database error: %s", request.method, request.url.path, exc)
        return JSONResponse({"error": "the database is unavailable; try again shortly"}, status_code=503)
    _log.error("admin %s %s failed: %s", request.method, request.url.path, exc)
    return JSONResponse({"error": "internal error"}, status_code=500)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (unknown route, wrong method) in the same ``{"error": ...}`` shape."""
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


def create_app(store: Store, *, token: str) -> FastAPI:
    """The admin app over ``store``; every route but ``/healthz`` needs ``token``."""
    app = FastAPI(title="Hygieia admin", docs_url=None, redoc_url=None, openapi_url="/api/openapi.json")
    metrics = AdminMetrics()

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        ok = await store.ping()
        return JSONResponse({"ok": ok}, status_code=200 if ok else 503)

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        body = metrics.render(await store.store_totals()) + await scheduler_metrics(store)
        return Response(body, media_type=CONTENT_TYPE)

    app.include_router(api_router(store))
    app.include_router(scheduler_router(store))
    app.include_router(page_router(store))
    app.add_exception_handler(HygieiaError, error_response)
    app.add_exception_handler(SQLAlchemyError, error_response)
    app.add_exception_handler(HTTPException, http_error)
    app.add_middleware(AdminAuth, token=token)
    app.add_middleware(AccessLog)  # outermost: logs 401s too
    return app
