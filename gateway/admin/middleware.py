"""ASGI middleware of the admin app: the token check (header, cookie, sign-in form, one-time ``?token=``)
and a log line.

Every path but ``/healthz`` needs the admin token, so a route added later is protected by
default. A program sends ``Authorization: Bearer <token>``. A browser that asks for a page
without the cookie gets the sign-in form (:mod:`gateway.admin.page_login`, status 401), which
POSTs the token to ``/login``; a script may open any page once with ``?token=<token>``. Either
way the browser gets an HttpOnly, SameSite=Strict cookie and a redirect to the page without the
token (so it stays out of the address bar and the history). The cookie holds an HMAC of the
token, never the token itself; changing the token logs everyone out. A state-changing request
signed in by the cookie, and the sign-in form's POST, must come from the page itself
(:mod:`gateway.admin.origin`), else 403.

The token must have at least :data:`MIN_TOKEN_CHARS` characters. A client address that
presents a wrong token (header, cookie, sign-in form or login link) :data:`MAX_FAILURES` times within
:data:`FAILURE_WINDOW_SECONDS` gets 429 for every further wrong or missing token until the
oldest failure ages out; each counted failure is logged. The right token is always answered:
a throttle that refused it would let any local process lock the admin out. Against guessing,
the token's length is the defence (see docs/security.md). The client address is the peer's;
X-Forwarded-For counts only from ``admin.trusted_proxies`` (see :mod:`gateway.admin.server`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from typing import Literal
from urllib.parse import parse_qs

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent.errors import ConfigError
from gateway.admin.origin import cross_origin_problem
from gateway.admin.page_login import LOGIN_PATH, login_page
from gateway.admin.views import html
from gateway.throttle import FAILURE_WINDOW_SECONDS as FAILURE_WINDOW_SECONDS
from gateway.throttle import MAX_FAILURES as MAX_FAILURES
from gateway.throttle import FailedLogins as FailedLogins

_log = logging.getLogger(__name__)

COOKIE = "hygieia_admin"
OPEN_PATHS = frozenset({"/healthz"})
_COOKIE_CONTEXT = b"hygieia admin cookie v1"
_ERASE_CONTEXT = b"hygieia admin erase confirmation v1"
MIN_TOKEN_CHARS = 16
MAX_LOGIN_FORM_BYTES = 4096
_URL_NOISE = re.compile(r"[\x00-\x20\x7f]")


def check_admin_token(token: str | None) -> str:
    """The admin token without spaces at its ends; a one-line ConfigError when missing or weak."""
    value = (token or "").strip()
    if not token:
        raise ConfigError("HYGIEIA_ADMIN_TOKEN is not set: the admin API refuses to start without it")
    if len(value) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"HYGIEIA_ADMIN_TOKEN is too short ({len(value)} characters besides spaces): use at least "
            f"{MIN_TOKEN_CHARS}, "
            "for example: python -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
    return value


def erase_key(token: str) -> bytes:
    """The key of the erase confirmation codes: derived from the token, like the cookie."""
    return hmac.new(token.encode(), _ERASE_CONTEXT, hashlib.sha256).digest()


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


def _throttled(wait: float) -> Response:
    return JSONResponse(
        {"error": f"too many failed attempts from your address: try again in {wait:.0f} s"},
        status_code=429,
        headers={"Retry-After": str(int(wait + 0.999))},
    )


def _address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _clean_location(url: URL) -> str:
    """The same path and query without ``token``; relative, and never ``//host`` (no open redirect:
    browsers read ``/\\host`` as ``//host`` and drop tabs and newlines, so those go too)."""
    clean = url.remove_query_params("token")
    path = "/" + _URL_NOISE.sub("", clean.path).lstrip("/\\")
    return path + (f"?{clean.query}" if clean.query else "")


def _wants_page(request: Request) -> bool:
    """A browser reading a page (not the API, not metrics): it gets the sign-in form, not JSON."""
    path = request.url.path
    return (
        request.method in ("GET", "HEAD")
        and not path.startswith("/api/")
        and path != "/metrics"
        and "text/html" in request.headers.get("accept", "")
    )


def _login_form(
    next_path: str, message: str, status_code: int, headers: dict[str, str] | None = None
) -> Response:
    response = html(login_page(next_path, message), status_code=status_code)
    response.headers.update(headers or {})
    return response


async def _form_fields(receive: Receive) -> dict[str, str] | None:
    """The sign-in form's fields (urlencoded, bounded); None when the body is too large."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if len(body) > MAX_LOGIN_FORM_BYTES:
            return None
        if not message.get("more_body"):
            break
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items() if values}


class AdminAuth:
    """Lets a request through only with the admin token (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str, failed_logins: FailedLogins | None = None) -> None:
        self.app = app
        self._token = check_admin_token(token)
        self._cookie = cookie_value(self._token)
        self._failed = failed_logins if failed_logins is not None else FailedLogins()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        address = _address(scope)
        request = Request(scope)
        if scope["path"] == LOGIN_PATH and request.method == "POST":
            answer = await self._form_login(request, receive, address)
            await answer(scope, receive, send)
            return
        login = request.query_params.get("token")
        if login is not None and request.method == "GET" and not scope["path"].startswith("/api/"):
            await self._login(request, login, address)(scope, receive, send)
            return
        signed_in = self._signed_in(request)
        if signed_in == "cookie" and (problem := cross_origin_problem(request)) is not None:
            _log.warning("admin %s %s from %s: %s", request.method, scope["path"], address, problem)
            await JSONResponse({"error": problem}, status_code=403)(scope, receive, send)
            return
        if signed_in is not None:
            if scope["path"] == LOGIN_PATH:  # signed in already: the form has nothing to do
                await RedirectResponse("/", status_code=303)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        wait = self._failed.retry_after(address)
        page = _wants_page(request)
        if wait is not None:
            answer = _throttled(wait)
            if page:
                message = f"Too many failed attempts from your address: try again in {wait:.0f} s."
                retry = {"Retry-After": answer.headers["retry-after"]}
                answer = _login_form(_clean_location(request.url), message, 429, retry)
            await answer(scope, receive, send)
            return
        if request.headers.get("authorization") or COOKIE in request.cookies:
            self._failure(address)
        if page:
            nowhere = scope["path"] == LOGIN_PATH
            await _login_form("/" if nowhere else _clean_location(request.url), "", 401)(scope, receive, send)
            return
        await _unauthorized("missing or wrong admin token")(scope, receive, send)

    def _failure(self, address: str) -> None:
        count = self._failed.record(address)
        window = self._failed.window
        _log.warning("failed admin authentication from %s (%d in the last %.0fs)", address, count, window)
        if count == self._failed.max_failures:
            _log.warning("throttling %s: %d failed attempts in %.0fs, answering 429", address, count, window)

    def _signed_in(self, request: Request) -> Literal["bearer", "cookie"] | None:
        """How the request proves it holds the token (None: it does not)."""
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials:
            return "bearer" if _same(credentials.strip(), self._token) else None
        cookie = request.cookies.get(COOKIE)
        return "cookie" if cookie is not None and _same(cookie, self._cookie) else None

    async def _form_login(self, request: Request, receive: Receive, address: str) -> Response:
        """The sign-in form's POST: from this origin only; a wrong token counts as a failed attempt."""
        if (problem := cross_origin_problem(request)) is not None:
            _log.warning("admin sign-in from %s: %s", address, problem)
            return _login_form("/", problem, 403)
        fields = await _form_fields(receive)
        if fields is None:
            return _login_form("/", "The form was too large: paste only the admin token.", 400)
        target = _clean_location(URL(fields.get("next") or "/"))
        given = fields.get("token", "").strip()  # a pasted token often brings a newline along
        if not given:
            return _login_form(target, "Enter the admin token.", 400)
        if _same(given, self._token):
            return self._signed_in_at(target)
        wait = self._failed.retry_after(address)
        if wait is None:
            self._failure(address)
            wait = self._failed.retry_after(address)
        if wait is not None:
            message = f"Too many failed attempts from your address: try again in {wait:.0f} s."
            return _login_form(target, message, 429, {"Retry-After": str(int(wait + 0.999))})
        message = "That is not the admin token. It is the value of HYGIEIA_ADMIN_TOKEN on the server."
        return _login_form(target, message, 401)

    def _signed_in_at(self, location: str) -> Response:
        response = RedirectResponse(location, status_code=303)
        response.set_cookie(COOKIE, self._cookie, httponly=True, samesite="strict", path="/")
        return response

    def _login(self, request: Request, given: str, address: str) -> Response:
        if not _same(given, self._token):
            wait = self._failed.retry_after(address)
            if wait is not None:
                return _throttled(wait)
            self._failure(address)
            return _unauthorized("wrong admin token in ?token=")
        return self._signed_in_at(_clean_location(request.url))


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
