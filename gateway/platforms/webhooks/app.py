"""The ASGI app under ``/hooks``: size cap, signature, rate, template, then the inbox, then 2xx.

Every refusal is JSON ``{"error": {"message", "type"}}`` with its status (401 bad signature, 404
unknown route, 413 too large, 429 over the rate, 400 not JSON, 503 not stored); nothing is stored
before the signature checks out, and nothing is acknowledged before the gateway has committed it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.config.webhooks import WebhookRoute
from gateway.platforms.base import ChatType, InboundHandler, InboundMessage, WebhookOrigin
from gateway.platforms.webhooks.coalescing import RateWindow, capped
from gateway.platforms.webhooks.signature import delivery_id, event_name, verify
from gateway.platforms.webhooks.template import MAX_VALUE_CHARS, Template, parse_template

_log = logging.getLogger(__name__)


class _TooLarge(Exception):
    pass


def refusal(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The one error shape of the webhooks door."""
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 400
    detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
    return refusal(status, "invalid_request", f"{request.method} {request.url.path}: {detail}")


def chat_type_of(platform: str, chat_id: str) -> ChatType:
    """How the target chat's session is keyed: Telegram groups have negative ids, a positive one is
    a private chat; a Discord channel is a guild channel (a group)."""
    if platform == "telegram" and not chat_id.startswith("-"):
        return "dm"
    return "group"


class WebhookApp:
    """The routes of ``webhooks:`` as one Starlette app; ``handler`` is the gateway's intake."""

    def __init__(
        self,
        routes: Mapping[str, WebhookRoute],
        secrets: Mapping[str, bytes],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._routes = dict(routes)
        self._secrets = dict(secrets)
        self._templates: dict[str, Template] = {n: parse_template(r.template) for n, r in routes.items()}
        self._rates = {n: RateWindow(r.rate_per_minute) for n, r in routes.items()}
        self._clock = clock
        self.handler: InboundHandler | None = None
        self.asgi = Starlette(
            routes=[Route("/{route}", self._receive, methods=["POST"])],
            exception_handlers={HTTPException: _http_error},
        )

    async def _receive(self, request: Request) -> Response:
        name = request.path_params["route"]
        route = self._routes.get(name)
        if route is None:
            return refusal(404, "not_found", f"no webhook route {name[:40]!r} (see webhooks.routes)")
        try:
            body = await _read_capped(request, route.max_body_bytes)
        except _TooLarge:
            return refusal(413, "too_large", f"the body is over this route's {route.max_body_bytes:,} bytes")
        except ClientDisconnect:
            return refusal(400, "invalid_request", "the client went away before the body was read")
        headers = {k.lower(): v for k, v in request.headers.items()}
        verdict = verify(
            route.signature,
            self._secrets[name],
            body,
            headers,
            now=self._clock(),
            max_skew=route.max_skew_seconds,
        )
        if not verdict.ok:
            _log.info("webhook refused: %s", verdict.reason, extra={"route": name})
            return refusal(401, "bad_signature", verdict.reason)
        wait = self._rates[name].take()
        if wait is not None:
            message = f"over this route's {route.rate_per_minute} deliveries per minute; retry later"
            return refusal(429, "rate_limited", message, {"Retry-After": str(int(wait) + 1)})
        payload = _parsed(body, headers.get("content-type", ""))
        if payload is None:
            return refusal(400, "invalid_json", "the body is not JSON (nor a form with a JSON 'payload')")
        delivery = delivery_id(route.signature, headers, body)
        event = event_name(route.signature, headers)
        if route.events and event not in route.events:
            return JSONResponse({"status": "ignored", "event": event, "delivery": delivery}, status_code=202)
        return await self._commit(name, route, payload, delivery, event)

    async def _commit(
        self, name: str, route: WebhookRoute, payload: object, delivery: str, event: str
    ) -> Response:
        try:
            specials = {"route": name, "event": event, "delivery": delivery, "body": _compact(payload)}
            text = capped(self._templates[name].render(payload, specials), route.max_template_chars)
        except (RecursionError, ValueError):  # nested just under the parser's limit, NaN in a value
            return refusal(400, "invalid_json", "the payload cannot be printed (nested too deeply?)")
        message = InboundMessage(
            platform=route.platform,
            chat_id=route.chat_id,
            user_id=f"webhook:{name}",
            user_name=f"webhook {name}",
            text=text,
            platform_message_id=f"webhook:{name}:{delivery}",
            chat_type=chat_type_of(route.platform, route.chat_id),
            webhook=WebhookOrigin(name, route.deliver_only, route.coalesce_seconds),
        )
        if self.handler is None:
            return refusal(503, "unavailable", "the webhooks platform is not started; retry later")
        try:
            await self.handler(message)
        except Exception:  # the store is down or refused: the sender must retry, we hold nothing
            _log.exception("a webhook delivery could not be stored", extra={"route": name})
            return refusal(503, "unavailable", "the delivery could not be stored; retry later")
        return JSONResponse({"status": "accepted", "delivery": delivery}, status_code=202)


async def _read_capped(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _parsed(body: bytes, content_type: str) -> object | None:
    """The JSON payload: the body, or GitHub's form encoding (``payload=<json>``)."""
    raw: str | bytes = body
    if content_type.split(";")[0].strip() == "application/x-www-form-urlencoded":
        fields = parse_qs(body.decode("utf-8", "replace"))
        if "payload" not in fields:
            return None
        raw = fields["payload"][0]
    try:
        return json.loads(raw)  # type: ignore[no-any-return]
    except (ValueError, RecursionError):
        return None


def _compact(payload: object) -> str:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "…"
