"""Telegram adapter on python-telegram-bot 22: long polling (default) or PTB's webhook server.

Delivery guarantee. PTB's ``Updater`` confirms updates to Telegram as soon as it has put them
on the application's queue: in polling mode the next ``getUpdates`` carries ``offset =
last + 1``; in webhook mode the HTTP 200 is written when ``put`` returns. We hand PTB a queue
(:class:`_CommitGatedQueue`) whose ``put`` returns only after the update has been *processed*,
and processing awaits the gateway's :data:`InboundHandler` (which returns once the message is
committed to the inbox). Updates are processed one at a time (``concurrent_updates(False)``).
So an update is confirmed only after its commit; if the handler fails or we stop first, ``put``
raises (or is cancelled), the offset does not move (webhook: the answer is a 500) and Telegram
delivers the update again. That is at-least-once; the inbox's idempotency on
``(platform, chat_id, platform_message_id)`` turns it into exactly-once. A batch fetched
together is confirmed together, so a crash mid-batch redelivers the batch's earlier updates
too; the inbox drops those duplicates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from telegram import BotCommand, Message, ReplyParameters, Update
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, RetryAfter, TelegramError
from telegram.ext import Application, ContextTypes, TypeHandler
from telegram.request import HTTPXRequest

from agent.errors import ConfigError
from gateway.config import TelegramSettings
from gateway.errors import AdapterError, DeliveryRefused
from gateway.platforms.base import (
    Attachment,
    InboundHandler,
    InboundMessage,
    OutboundTarget,
    PlatformAdapter,
)
from gateway.platforms.pacing import RatePacer
from gateway.platforms.telegram_bot.drafts import TelegramDrafts
from gateway.platforms.telegram_bot.format import to_telegram_html
from gateway.platforms.telegram_bot.inbound import PLATFORM, BotIdentity, DownloadLimits, to_inbound
from gateway.platforms.telegram_bot.rate_limiter import rate_limiter_for
from gateway.splitter import utf16_len

_log = logging.getLogger(__name__)

DEFAULT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("new", "Start a new conversation"),
    ("compact", "Summarize older messages now"),
    ("context", "Show how full the context window is"),
    ("usage", "Show tokens used and cost"),
    ("status", "Show the session's state"),
    ("stop", "Stop the current answer"),
    ("help", "List the commands"),
)
ALLOWED_UPDATES = [Update.MESSAGE, Update.EDITED_MESSAGE, Update.CHANNEL_POST, Update.EDITED_CHANNEL_POST]
TYPING_INTERVAL = 4.0
"""Telegram shows "typing" for ~5 s after each sendChatAction."""

Context = ContextTypes.DEFAULT_TYPE
_App = Application[Any, Any, Any, Any, Any, Any]


class IntakeFailed(TelegramError):
    """The gateway did not commit an update; raised from ``put`` so PTB does not confirm it."""


class _CommitGatedQueue(asyncio.Queue[object]):
    """PTB's update queue whose ``put`` of an Update returns only once that update is processed."""

    def __init__(self) -> None:
        super().__init__()
        self._failed: set[int] = set()

    def mark_failed(self, update_id: int) -> None:
        self._failed.add(update_id)

    async def put(self, item: object) -> None:
        await super().put(item)
        if not isinstance(item, Update):
            return  # PTB's own stop signal
        await self.join()  # processing is sequential: joined means this update was handled
        if item.update_id in self._failed:
            self._failed.discard(item.update_id)
            raise IntakeFailed(f"update {item.update_id} was not committed; Telegram will deliver it again")


class _TolerantUpdatesRequest(HTTPXRequest):
    """The getUpdates transport: an update PTB cannot parse is reduced to its id, with a log line.

    PTB parses a getUpdates batch as a whole and, on failure, fetches the same batch again at
    once, forever: one malformed update would jam intake in a hot loop. Reduced to its id it is
    delivered as an empty update, ignored, and confirmed.
    """

    @staticmethod
    def parse_json_payload(payload: bytes) -> dict[str, Any]:
        # PTB's documented override point; this request object only ever serves getUpdates.
        data = HTTPXRequest.parse_json_payload(payload)
        if isinstance(data.get("result"), list):
            data["result"] = [_parseable_or_bare(item) for item in data["result"]]
        return data


def _parseable_or_bare(item: Any) -> Any:
    try:
        Update.de_json(item, None)
    except Exception:  # any failure to parse foreign data means: skip this one update
        update_id = item.get("update_id") if isinstance(item, dict) else None
        if not isinstance(update_id, int):
            raise
        _log.warning("telegram: skipping malformed update %s: %.300r", update_id, item)
        return {"update_id": update_id}
    return item


class TelegramAdapter(TelegramDrafts, PlatformAdapter):
    """A Telegram bot: inbound updates to the gateway, replies out as HTML with a plain-text fallback."""

    name = PLATFORM
    text_limit = 4096
    text_format = "html"
    streams = True
    sends_alone = True

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None,
        settings: TelegramSettings,
        max_text_file_bytes: int = 200_000,
        max_download_bytes: int = 5_000_000,
        max_send_attempts: int = 5,
        stop_grace: float = 5.0,
    ) -> None:
        if not token:
            raise ConfigError("TELEGRAM_BOT_TOKEN: empty")
        if settings.mode == "webhook" and (not settings.webhook_url or settings.webhook_secret is None):
            raise ConfigError(
                "webhook mode needs HYGIEIA_TELEGRAM__WEBHOOK_URL and HYGIEIA_TELEGRAM__WEBHOOK_SECRET"
            )
        self._token = token
        self._options: dict[str, Any] = {
            "base_url": base_url,
            "settings": settings,
            "max_text_file_bytes": max_text_file_bytes,
            "max_download_bytes": max_download_bytes,
            "max_send_attempts": max_send_attempts,
            "stop_grace": stop_grace,
        }
        self._root = base_url.rstrip("/") if base_url else None
        self._settings = settings
        self._limits = DownloadLimits(max_text_file_bytes, max(max_download_bytes, max_text_file_bytes))
        self._max_send_attempts = max_send_attempts
        self._stop_grace = stop_grace
        self._commands: list[tuple[str, str]] = list(DEFAULT_COMMANDS)
        self._app: _App | None = None
        self._queue: _CommitGatedQueue | None = None
        self._handler: InboundHandler | None = None
        self._me: BotIdentity | None = None
        self._inflight: asyncio.Task[None] | None = None
        self._pacer: RatePacer | None = None
        self._no_drafts: set[str] = set()

    def share_rate_limits(self, pacer: RatePacer) -> None:
        """Pace sends through ``pacer`` (every worker's Telegram sends share one set of limits);
        twins made afterwards share it too."""
        if self._app is not None:
            raise AdapterError("Telegram: rate limits are chosen before start")
        self._pacer = pacer

    def measure(self, text: str) -> int:
        """Telegram counts message length in UTF-16 code units."""
        return utf16_len(text)

    @property
    def me(self) -> BotIdentity:
        if self._me is None:
            raise AdapterError("Telegram adapter is not started")
        return self._me

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self, handler: InboundHandler) -> None:
        if self._app is not None:
            raise AdapterError("Telegram adapter is already started")
        self._handler = handler
        self._queue = _CommitGatedQueue()
        app = self._build(self._queue)
        try:
            await app.initialize()  # getMe
            self._me = BotIdentity(id=app.bot.id, username=app.bot.username)
            await self._set_commands(app)
            await app.start()
            self._app = app  # before intake: the handler may already want to reply
            await self._start_intake(app)
        except (TelegramError, OSError) as exc:  # OSError: the webhook port is taken
            self._app = None
            await _teardown(app)
            raise AdapterError(f"Telegram: could not start: {exc}") from exc
        _log.info("telegram: started as @%s (%s)", self._me.username, self._settings.mode)

    @property
    def shared_intake(self) -> bool:
        """Webhook mode runs on every intake node (the inbox stores a redelivered update once);
        polling is elected (Telegram answers a second poller 409)."""
        return self._settings.mode == "webhook"

    def twin(self) -> TelegramAdapter:
        other = TelegramAdapter(self._token, **self._options)
        other._commands = list(self._commands)
        other._pacer = self._pacer
        other._no_drafts = self._no_drafts
        return other

    async def start_sending(self) -> None:
        """The Bot API client only (getMe, then sendMessage and friends): no polling, no webhook, so
        any number of processes may hold one while a single one polls."""
        if self._app is not None:
            raise AdapterError("Telegram adapter is already started")
        app = self._build(_CommitGatedQueue())
        try:
            await app.initialize()  # getMe
        except (TelegramError, OSError) as exc:
            await _teardown(app)
            raise AdapterError(f"Telegram: could not start: {exc}") from exc
        self._me = BotIdentity(id=app.bot.id, username=app.bot.username)
        self._app = app
        _log.info("telegram: sending as @%s (no intake here)", self._me.username)

    async def stop(self) -> None:
        """Stop intake first (no further confirmations), then let the update in flight finish or abort."""
        app = self._app
        if app is None:
            return
        loop = asyncio.get_running_loop()
        abort = loop.call_later(self._stop_grace, self._abort_inflight)
        try:
            await _teardown(app)
        finally:
            abort.cancel()
            self._app = None
        _log.info("telegram: stopped")

    def _build(self, queue: _CommitGatedQueue) -> _App:
        builder = (
            Application.builder()
            .token(self._token)
            .rate_limiter(
                rate_limiter_for(self._pacer, self._settings, max_retries=self._max_send_attempts - 1)
            )
            .concurrent_updates(False)
            .update_queue(queue)
            .get_updates_request(_TolerantUpdatesRequest(connection_pool_size=1))
            .job_queue(None)
        )
        if self._root is not None:
            builder = builder.base_url(f"{self._root}/bot").base_file_url(f"{self._root}/file/bot")
        app = builder.build()
        app.add_handler(TypeHandler(Update, self._on_update))
        app.add_error_handler(self._on_error)
        return app

    async def _start_intake(self, app: _App) -> None:
        updater = app.updater
        assert updater is not None
        if self._settings.mode == "webhook":
            url = self._settings.webhook_url
            secret = self._settings.webhook_secret
            assert url is not None and secret is not None
            await updater.start_webhook(
                listen=self._settings.webhook_listen,
                port=self._settings.webhook_port,
                url_path=urlsplit(url).path.lstrip("/"),
                webhook_url=url,
                secret_token=secret.get_secret_value(),
                allowed_updates=ALLOWED_UPDATES,
                bootstrap_retries=3,
            )
        else:
            await updater.start_polling(
                poll_interval=0.0,
                timeout=self._settings.poll_timeout,
                allowed_updates=ALLOWED_UPDATES,
                bootstrap_retries=3,
                error_callback=self._on_poll_error,
            )

    def _abort_inflight(self) -> None:
        if self._inflight is not None and not self._inflight.done():
            _log.warning("telegram: stopping before the gateway committed an update; it will come again")
            self._inflight.cancel()

    # --- intake ----------------------------------------------------------------------------------

    async def _on_update(self, update: object, context: Context) -> None:
        """Convert and hand to the gateway, awaiting its commit; on failure the update is not confirmed."""
        if not isinstance(update, Update) or self._handler is None or self._queue is None:
            return
        inbound = await to_inbound(
            update, bot=context.bot, me=self.me, limits=self._limits, ambient=self._settings.ambient
        )
        if inbound is None:
            return
        task = asyncio.create_task(self._deliver(self._handler, inbound))
        self._inflight = task
        try:
            await asyncio.wait({task})
        finally:
            self._inflight = None
            if not task.done():
                task.cancel()
        if task.cancelled():
            self._queue.mark_failed(update.update_id)
        elif (exc := task.exception()) is not None:
            self._queue.mark_failed(update.update_id)
            _log.error("telegram: the gateway failed to take update %s", update.update_id, exc_info=exc)

    @staticmethod
    async def _deliver(handler: InboundHandler, inbound: InboundMessage) -> None:
        await handler(inbound)

    async def _on_error(self, update: object, context: Context) -> None:
        """PTB's error handler: an update we could not convert is logged and confirmed (never jams intake)."""
        update_id = update.update_id if isinstance(update, Update) else None
        _log.error("telegram: could not process update %s", update_id, exc_info=context.error)

    @staticmethod
    def _on_poll_error(exc: TelegramError) -> None:
        if isinstance(exc, IntakeFailed):
            _log.warning("telegram: %s", exc)
        else:
            _log.warning("telegram: polling failed, retrying: %s", exc)

    # --- commands --------------------------------------------------------------------------------

    async def register_commands(self, commands: Sequence[tuple[str, str]]) -> None:
        """Set the command menu (applied on start; immediately when already running)."""
        self._commands = list(commands)
        if self._app is not None:
            await self._set_commands(self._app)

    async def _set_commands(self, app: _App) -> None:
        try:
            await app.bot.set_my_commands([BotCommand(name, desc[:256]) for name, desc in self._commands])
        except TelegramError as exc:  # a cosmetic menu must not stop the bot
            _log.warning("telegram: could not set the command menu: %s", exc)

    # --- sending ---------------------------------------------------------------------------------

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        """Send ``text`` as HTML (plain text if Telegram rejects the formatting); returns "chat:message" ids.

        ``text`` must fit (delivery splits with :func:`gateway.splitter.split_message` and
        :meth:`measure`); a longer text is refused (:meth:`refuse_oversized`).
        """
        app = self._require_app()
        if not text.strip():
            return []
        self.refuse_oversized(text)
        message = await self._send_part(app, target, text)
        return [f"{message.chat_id}:{message.message_id}"]

    async def _send_part(self, app: _App, target: OutboundTarget, text: str) -> Message:
        kwargs: dict[str, Any] = {}
        if target.thread_id:
            kwargs["message_thread_id"] = int(target.thread_id)
        if target.reply_to_message_id:
            number = target.reply_to_message_id.rpartition(":")[2]
            kwargs["reply_parameters"] = ReplyParameters(int(number), allow_sending_without_reply=True)
        chat_id = _chat_id(target.chat_id)
        try:
            return await self._send_paced(app, chat_id, to_telegram_html(text), ParseMode.HTML, kwargs)
        except BadRequest as exc:
            if "can't parse entities" not in str(exc).lower():
                # A 400 ("chat not found", "message thread not found"...) is final: a dead letter.
                raise DeliveryRefused(f"Telegram refused the message: {exc}") from exc
            _log.warning("telegram: formatting rejected (%s); sending the original as plain text", exc)
        try:
            return await self._send_paced(app, chat_id, text, None, kwargs)
        except BadRequest as exc:
            raise DeliveryRefused(f"Telegram refused the message: {exc}") from exc

    async def _send_paced(
        self,
        app: _App,
        chat_id: int | str,
        text: str,
        parse_mode: str | None,
        kwargs: dict[str, Any],
    ) -> Message:
        """sendMessage. The rate limiter paces it and waits out 429s (retry_after), pausing all sends
        (with :meth:`share_rate_limits`, every worker's sends to that scope)."""
        try:
            try:
                sent: Message = await app.bot.send_message(chat_id, text, parse_mode=parse_mode, **kwargs)
            except ChatMigrated as exc:  # a group became a supergroup: same chat, new id
                sent = await app.bot.send_message(exc.new_chat_id, text, parse_mode=parse_mode, **kwargs)
        except RetryAfter as exc:
            raise AdapterError(
                f"Telegram flood limit persisted after {self._max_send_attempts} attempts"
            ) from exc
        except BadRequest:
            raise
        except Forbidden as exc:  # blocked by the user, removed from the group: final
            raise DeliveryRefused(f"Telegram send failed: {exc}") from exc
        except TelegramError as exc:
            raise AdapterError(f"Telegram send failed: {exc}") from exc
        return sent

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        """getFile, then the file endpoint (Bot API servers serve up to 20 MB)."""
        app = self._require_app()
        if not attachment.file_id:
            raise AdapterError("Telegram: the attachment has no file id")
        try:
            file = await app.bot.get_file(attachment.file_id)
            if file.file_size is not None and file.file_size > max_bytes:
                raise AdapterError(f"Telegram: the file is larger than {max_bytes:,} bytes")
            return bytes(await file.download_as_bytearray())
        except TelegramError as exc:
            raise AdapterError(f"Telegram: could not fetch the file: {exc}") from exc

    async def edit(self, target: OutboundTarget, message_id: str, text: str) -> None:
        """editMessageText (HTML, else the plain original); "message is not modified" is no error."""
        app = self._require_app()
        chat, _, number = message_id.rpartition(":")
        chat_id = _chat_id(chat or target.chat_id)
        for body, mode in ((to_telegram_html(text), ParseMode.HTML), (text, None)):
            try:
                await app.bot.edit_message_text(
                    body, chat_id=chat_id, message_id=int(number), parse_mode=mode
                )
                return
            except BadRequest as exc:
                reason = str(exc).lower()
                if "not modified" in reason:
                    return
                if mode is None or "can't parse entities" not in reason:
                    raise AdapterError(f"Telegram refused the edit: {exc}") from exc
            except RetryAfter as exc:
                raise AdapterError(f"Telegram flood limit on edits: retry after {exc.retry_after}") from exc
            except TelegramError as exc:
                raise AdapterError(f"Telegram edit failed: {exc}") from exc

    async def send_typing(self, target: OutboundTarget) -> None:
        """Best effort: a failed typing indicator is logged, never raised."""
        app = self._require_app()
        thread = int(target.thread_id) if target.thread_id else None
        try:
            await app.bot.send_chat_action(
                _chat_id(target.chat_id), ChatAction.TYPING, message_thread_id=thread
            )
        except TelegramError as exc:
            _log.debug("telegram: typing indicator failed: %s", exc)

    @asynccontextmanager
    async def typing_loop(
        self, target: OutboundTarget, interval: float = TYPING_INTERVAL
    ) -> AsyncIterator[None]:
        """Keep "typing…" visible while the body runs (refreshed every ``interval`` seconds)."""

        async def refresh() -> None:
            while True:
                await self.send_typing(target)
                await asyncio.sleep(interval)

        task = asyncio.create_task(refresh())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.wait({task})

    def _require_app(self) -> _App:
        if self._app is None:
            raise AdapterError("Telegram adapter is not started")
        return self._app


async def _teardown(app: _App) -> None:
    """Stop intake (no more confirmations), then processing, then close the HTTP clients."""
    if app.updater is not None and app.updater.running:
        await app.updater.stop()
    if app.running:
        await app.stop()
    await app.shutdown()


def _chat_id(value: str) -> int | str:
    """Numeric chat ids as int (the rate limiter tells groups by sign); ``@channel`` names as they are."""
    return int(value) if value.lstrip("-").isdigit() else value
