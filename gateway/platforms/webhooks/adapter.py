"""The webhooks platform: mounts its app on the shared HTTP listener and hands deliveries to the
gateway. It receives only; what it delivers goes out through the target chat's own platform."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from starlette.types import ASGIApp

from gateway.config.webhooks import WebhookRoute
from gateway.errors import AdapterError
from gateway.platforms.base import InboundHandler, OutboundTarget, PlatformAdapter
from gateway.platforms.webhooks.app import WebhookApp

MOUNT = "/hooks"


class Listener(Protocol):
    """What the adapter needs of the shared listener (gateway.runner.listener.DoorListener)."""

    def mount(self, prefix: str, app: ASGIApp) -> None: ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...


class WebhooksAdapter(PlatformAdapter):
    """``/hooks/<route>`` on ``listener``; started, it joins the listener, stopped, it leaves."""

    name = "webhooks"

    def __init__(
        self, listener: Listener, routes: Mapping[str, WebhookRoute], secrets: Mapping[str, bytes]
    ) -> None:
        self.app = WebhookApp(routes, secrets)
        self._listener = listener
        self._open = False
        listener.mount(MOUNT, self.app.asgi)

    async def start(self, handler: InboundHandler) -> None:
        self.app.handler = handler
        if not self._open:
            await self._listener.open()
            self._open = True

    async def stop(self) -> None:
        self.app.handler = None
        if self._open:
            self._open = False
            await self._listener.close()

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        raise AdapterError("webhooks receive only; replies go to the route's deliver_to chat")
