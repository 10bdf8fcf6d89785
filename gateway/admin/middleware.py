"""ASGI middleware of the admin app: the token check (header, cookie, one-time ``?token=``) and a log line.

Every path but ``/healthz`` needs the admin token, so a route added later is protected by
default. A program sends ``Authorization: Bearer <token>``. A browser opens any page once
with ``?token=<token>``: it gets an HttpOnly, SameSite=Strict cookie and a redirect to the
same URL without the token (so it leaves the address bar and the history). The cookie
holds an HMAC of the token, never the token itself; changing the token logs everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_log = logging.getLogger(__name__)

COOKIE = "hygieia_admin"
OPEN_PATHS = frozenset({"/healthz"})
_COOKIE_CONTEXT = b"hygieia admin cookie v1"


def cookie_value(token: str) -> str:
    """What the browser keeps: derived from the token, useless anywhere else."""
    return hmac.new(token.encode(), _COOKIE_CONTEXT, hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    # compare_digest on str accepts ASCII only; bytes take anything a client may send.
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def _unauthorized(reason: str) -> Response:
    return JSONResponse(
        {"error": f"{reason}: send 'Authorization: Bearer <token>' (a browser: open /?token=<token> once)"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


def _clean_location(url: URL) -> str:
    """The same path and query without ``token``; relative, and never ``//host`` (no open redirect)."""
    clean = url.remove_query_params("token")
    path = "/" + clean.path.lstrip("/")
    return path + (f"?{clean.query}" if clean.query else "")


class AdminAuth:
    """Lets a request through only with the admin token (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        if not token:
            raise ValueError("the admin token must not be empty")
        self.app = app
        self._token = token
        self._cookie = cookie_value(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        login = request.query_params.get("token")
        if login is not None and request.method == "GET" and not scope["path"].startswith("/api/"):
            await self._login(request, login)(scope, receive, send)
            return
        if self._authorized(request):
            await self.app(scope, receive, send)
            return
        await _unauthorized("missing or wrong admin token")(scope, receive, send)

    def _authorized(self, request: Request) -> bool:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials:
            return _same(credentials.strip(), self._token)
        cookie = request.cookies.get(COOKIE)
        return cookie is not None and _same(cookie, self._cookie)

    def _login(self, request: Request, given: str) -> Response:
        if not _same(given, self._token):
            return _unauthorized("wrong admin token in ?token=")
        response = RedirectResponse(_clean_location(request.url), status_code=303)
        response.set_cookie(COOKIE, self._cookie, httponly=True, samesite="strict", path="/")
        return response


class AccessLog:
    """One log line per request: method, path (never the query: it may hold a token), status, time."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            _log.info(
                "admin %s %s -> %d (%.1f ms)",
                scope["method"],
                scope["path"],
                status,
                (time.perf_counter() - started) * 1000,
            )
