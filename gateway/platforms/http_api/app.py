"""The Starlette app of the API (mounted at ``/v1``): the key check, the body cap, the routes, and
one place where every error becomes OpenAI's shape (a bug included: never a traceback)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.platforms.http_api.errors import (
    MAX_BODY_BYTES,
    ApiError,
    invalid_api_key,
    invalid_request,
    model_not_found,
    throttled,
    too_large,
)

if TYPE_CHECKING:
    from gateway.platforms.http_api.adapter import ApiAdapter

_log = logging.getLogger(__name__)


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def authenticate(adapter: ApiAdapter, request: Request) -> str:
    """The name of the key the request carries; 401, or 429 for an address that failed too often
    (the right key is always let through, as the admin token is)."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    given = given.strip()
    name = adapter.keys.identify(given) if scheme.lower() == "bearer" and given else None
    if name is not None:
        return name
    address = client_address(request)
    wait = adapter.throttle.retry_after(address)
    if wait is not None:
        raise throttled(wait)
    if request.headers.get("authorization"):
        count = adapter.throttle.record(address)
        _log.warning("wrong API key from %s (%d in the last %.0fs)", address, count, adapter.throttle.window)
    raise invalid_api_key()


async def read_body(request: Request) -> bytes:
    """The body, at most :data:`MAX_BODY_BYTES` (413 beyond, read no further)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise invalid_request("Content-Length is not a number.") from None
        if size > MAX_BODY_BYTES:
            raise too_large(size)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise too_large(None)
    return bytes(body)


def check_model(model: str) -> None:
    from gateway.platforms.http_api.adapter import MODEL_NAME

    if model != MODEL_NAME:
        raise model_not_found(model)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        error = ApiError(405, f"{request.method} is not allowed on {request.url.path}.")
    elif exc.status_code == 404:
        error = ApiError(404, f"Unknown request URL: {request.method} {request.url.path}.")
    else:
        error = ApiError(exc.status_code, str(exc.detail))
    return error.response()


async def _bug(request: Request, exc: Exception) -> Response:
    _log.error("the API failed answering %s %s", request.method, request.url.path, exc_info=exc)
    body = {
        "error": {
            "message": "The server failed while answering; the failure is logged.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    return JSONResponse(body, status_code=500)


def build_app(adapter: ApiAdapter) -> Starlette:
    """The ``/v1`` app of ``adapter``."""
    from gateway.platforms.http_api.routes import chat_completions, models, responses

    async def list_models(request: Request) -> Response:
        authenticate(adapter, request)
        return models()

    async def chat(request: Request) -> Response:
        return await chat_completions(adapter, request)

    async def respond(request: Request) -> Response:
        return await responses(adapter, request)

    return Starlette(
        routes=[
            Route("/models", list_models, methods=["GET"]),
            Route("/chat/completions", chat, methods=["POST"]),
            Route("/responses", respond, methods=["POST"]),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _bug},
    )
