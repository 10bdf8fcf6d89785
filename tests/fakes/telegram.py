"""A fake Telegram Bot API server on 127.0.0.1 that python-telegram-bot talks to unchanged.

Wire format as the real server: ``/bot<TOKEN>/<method>`` with form-urlencoded (each value
JSON-encoded, as PTB sends them), multipart or JSON bodies; ``/file/bot<TOKEN>/<path>``
downloads; ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code", "description"}``.
``sendMessage`` with ``parse_mode=HTML`` is parsed with Telegram's rules (tests/fakes/telegram_html.py),
and the 4096 UTF-16 unit limit applies after parsing.

    async with FakeTelegram() as fake:
        app = Application.builder().token(fake.token).base_url(fake.bot_base_url)...
        fake.push_message(42, "hello", user_id=42)
        await fake.wait_for_sent(1)
        fake.fail_next("sendMessage", 429, retry_after=1)

``FakeTelegram(limits=TelegramLimits())`` enforces Telegram's flood limits (30 messages/s overall,
1/s per chat, 20/min per group: tests/fakes/telegram_limits.py) and answers 429 with
``retry_after`` beyond them; ``too_many_requests`` counts every 429 the fake answered.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import math
import re
import secrets
import time
from collections import defaultdict, deque
from typing import Any

import aiohttp
from aiohttp import web
from PIL import Image, UnidentifiedImageError

from tests.fakes.gate import SendGate
from tests.fakes.telegram_html import EntityParseError, parse_html, utf16_units
from tests.fakes.telegram_limits import FloodLimits, TelegramLimits
from tests.fakes.telegram_poll import PollDesk
from tests.fakes.telegram_wire import (
    ApiCall,
    ApiError,
    Failure,
    FakeDocument,
    SentMessage,
    auto_entities,
    chat_key,
    error_response,
    read_params,
)

__all__ = ["ApiCall", "FakeDocument", "FakeTelegram", "SentMessage", "TelegramLimits"]

MAX_MESSAGE_UNITS = 4096
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
_DEFAULT_400 = "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 0"


class FakeTelegram:
    """The fake server plus helpers that play the users' side."""

    def __init__(
        self,
        *,
        token: str | None = None,
        bot_id: int = 123456,
        username: str = "hygieia_test_bot",
        long_poll_cap: float = 0.3,
        flood_limit: tuple[int, float] | None = None,
        limits: TelegramLimits | None = None,
        port: int = 0,
        first_update_id: int = 1000,
    ) -> None:
        # A token of its own: a bot left running by another test, polling a port this fake now
        # reuses, is refused (401) instead of taking this test's updates.
        self.token = token or f"{bot_id}:TEST-{secrets.token_urlsafe(24)}"
        self.bot_user: dict[str, Any] = {
            "id": bot_id,
            "is_bot": True,
            "first_name": "Hygieia",
            "username": username,
            "can_join_groups": True,
            "can_read_all_group_messages": True,
            "supports_inline_queries": False,
        }
        self.long_poll_cap = long_poll_cap
        self.flood_limit = flood_limit
        self.limits = None if limits is None else FloodLimits(limits)
        self.too_many_requests = 0  # every 429 answered (limits, flood_limit, fail_next)
        self.sent: list[SentMessage] = []
        self.requests: list[ApiCall] = []
        self.actions: list[dict[str, Any]] = []
        self.edits: list[tuple[int | str, int, str, float]] = []  # (chat, message id, plain text, when)
        self.drafts: list[tuple[int | str, int, str, float]] = []  # (chat, draft id, plain text, when)
        self.commands: list[dict[str, Any]] = []
        self.webhook: dict[str, Any] | None = None
        self.acked_offset = 0
        self._polls = PollDesk()
        self.gate = SendGate()  # tests that kill clients hold it around the kill (tests/fakes/gate.py)
        self._pending: list[dict[str, Any]] = []
        self._update_ids = itertools.count(first_update_id)
        self._message_ids: defaultdict[int | str, itertools.count[int]] = defaultdict(
            lambda: itertools.count(1)
        )
        self._messages: dict[tuple[int | str, int], dict[str, Any]] = {}
        self._chats: dict[int | str, dict[str, Any]] = {}
        self._threads: defaultdict[int | str, set[int]] = defaultdict(set)
        self._files: dict[str, tuple[FakeDocument, str]] = {}
        self._file_ids = itertools.count(1)
        self._failures: defaultdict[str, deque[Failure]] = defaultdict(deque)
        self.deleted: list[tuple[int | str, int]] = []
        self._flood: defaultdict[int | str, deque[float]] = defaultdict(deque)
        self._new_update = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._listen_port = port  # 0: any free port

    # --- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._listen_port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.long_poll_cap = 0.0
        self._new_update.set()  # wake a long poll still waiting so the server closes at once
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def root(self) -> str:
        """What HYGIEIA_TELEGRAM_BASE_URL would be set to."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def bot_base_url(self) -> str:
        return f"{self.root}/bot"

    @property
    def file_base_url(self) -> str:
        return f"{self.root}/file/bot"

    # --- the users' side ------------------------------------------------------------------------

    def push_message(
        self,
        chat_id: int,
        text: str | None,
        *,
        user_id: int | None = None,
        chat_type: str = "private",
        thread_id: int | None = None,
        entities: list[dict[str, Any]] | None = None,
        reply_to_bot: bool = False,
        document: FakeDocument | None = None,
        photo: bytes | None = None,
        voice: bytes | None = None,
        voice_seconds: int = 3,
        caption: str | None = None,
        username: str | None = "alice",
        first_name: str = "Alice",
        is_bot: bool = False,
        edited: bool = False,
        message_id: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Enqueue a realistic Update (message, edited_message or channel_post) and return it."""
        chat = self._chat(chat_id, chat_type, forum=thread_id is not None)
        mid = message_id if message_id is not None else next(self._message_ids[chat_id])
        msg: dict[str, Any] = {"message_id": mid, "date": int(time.time()), "chat": chat}
        if chat_type != "channel":
            uid = user_id if user_id is not None else chat_id
            sender: dict[str, Any] = {"id": uid, "is_bot": is_bot, "first_name": first_name}
            if username:
                sender["username"] = username
            msg["from"] = sender
        else:
            msg["sender_chat"] = chat
        if thread_id is not None:
            self._threads[chat_id].add(thread_id)
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
        if text is not None:
            msg["text"] = text
            found = entities if entities is not None else auto_entities(text)
            if found:
                msg["entities"] = found
        if caption is not None:
            msg["caption"] = caption
            found = auto_entities(caption)
            if found:
                msg["caption_entities"] = found
        if reply_to_bot:
            msg["reply_to_message"] = self._last_bot_message(chat_id, chat, thread_id)
        if document is not None:
            msg["document"] = self._register_document(document)
        if photo is not None:
            msg["photo"] = self._register_photo(photo)
        if voice is not None:
            file_id, unique = self._register(FakeDocument("voice.ogg", voice, "audio/ogg"), "voice")
            msg["voice"] = {
                "file_id": file_id,
                "file_unique_id": unique,
                "duration": voice_seconds,
                "mime_type": "audio/ogg",
                "file_size": len(voice),
            }
        if edited:
            msg["edit_date"] = int(time.time())
        msg.update(extra or {})
        self._messages[(chat_id, mid)] = msg
        if chat_type == "channel":
            kind = "edited_channel_post" if edited else "channel_post"
        else:
            kind = "edited_message" if edited else "message"
        return self.push_update({kind: msg})

    def push_update(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Enqueue any update payload (an ``update_id`` is added); for malformed or unknown updates."""
        update = {"update_id": next(self._update_ids), **payload}
        self._pending.append(update)
        self._new_update.set()
        return update

    def fail_next(
        self,
        method: str,
        status: int,
        *,
        retry_after: int | None = None,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this error instead of handling them."""
        if description is None:
            description = {
                429: f"Too Many Requests: retry after {retry_after or 1}",
                400: _DEFAULT_400,
                403: "Forbidden: bot was blocked by the user",
                500: "Internal Server Error",
                502: "Bad Gateway",
            }.get(status, f"Error {status}")
        if status == 429 and retry_after is None:
            retry_after = 1
        for _ in range(times):
            self._failures[method].append(Failure(status, description, retry_after))

    def user_deletes(self, chat_id: int | str, message_id: int) -> None:
        """A user deletes one of the bot's messages in their client: it is gone for the bot too,
        so a later edit of it is answered "message to edit not found", as Telegram does."""
        del self._messages[(chat_id, message_id)]
        self.deleted.append((chat_id, message_id))
        self.sent = [s for s in self.sent if (s.chat_id, s.message_id) != (chat_id, message_id)]

    @property
    def conflicts(self) -> int:
        """getUpdates calls answered 409 because another poller was waiting."""
        return self._polls.conflicts

    @property
    def pending_update_ids(self) -> list[int]:
        return [u["update_id"] for u in self._pending]

    def calls(self, method: str) -> list[ApiCall]:
        return [c for c in self.requests if c.method == method]

    async def wait_for_sent(self, n: int, timeout: float = 5.0) -> list[SentMessage]:  # noqa: ASYNC109
        """Wait until at least ``n`` messages were sent; returns them all."""
        await self._wait(lambda: len(self.sent) >= n, timeout, f"{n} sent messages (have {len(self.sent)})")
        return list(self.sent)

    async def wait_for_call(self, method: str, n: int = 1, timeout: float = 5.0) -> list[ApiCall]:  # noqa: ASYNC109
        await self._wait(lambda: len(self.calls(method)) >= n, timeout, f"{n} calls of {method}")
        return self.calls(method)

    async def wait_for_acked(self, offset: int, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        await self._wait(lambda: self.acked_offset >= offset, timeout, f"offset {offset} acknowledged")

    async def deliver_webhook(
        self, *, secret_token: str | None = None, use_registered_secret: bool = True
    ) -> list[int]:
        """POST pending updates to the registered webhook like Telegram does; stops at the first non-200.

        The registered secret is sent unless ``secret_token`` overrides it.
        """
        assert self.webhook is not None, "no webhook registered"
        secret = (
            secret_token
            if secret_token is not None
            else (self.webhook.get("secret_token") if use_registered_secret else None)
        )
        headers = {"Content-Type": "application/json"}
        if secret:
            headers["X-Telegram-Bot-Api-Secret-Token"] = secret
        statuses: list[int] = []
        async with aiohttp.ClientSession() as session:
            while self._pending:
                update = self._pending[0]
                async with session.post(
                    self.webhook["url"], data=json.dumps(update), headers=headers
                ) as resp:
                    statuses.append(resp.status)
                if statuses[-1] != 200:
                    break
                self._pending.pop(0)
        return statuses

    # --- the server -----------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return error_response(401, "Unauthorized")
        method = request.match_info["method"]
        params = await read_params(request)
        call = ApiCall(method, params)
        self._polls.request(request)
        if method in ("sendMessage", "editMessageText") and not await self.gate.passage(request):
            return web.Response(status=499)
        self.requests.append(call)
        failures = self._failures.get(method)
        if failures:
            failure = failures.popleft()
            call.status = failure.status
            self.too_many_requests += failure.status == 429
            return error_response(failure.status, failure.description, retry_after=failure.retry_after)
        handler = getattr(self, f"_m_{method.lower()}", None)
        if handler is None:
            call.status = 404
            return error_response(404, "Not Found")
        try:
            result = await handler(params)
        except ApiError as exc:
            call.status = exc.status
            self.too_many_requests += exc.status == 429
            return error_response(exc.status, exc.description, retry_after=exc.retry_after)
        return web.json_response({"ok": True, "result": result})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return error_response(401, "Unauthorized")
        path = request.match_info["path"]
        for doc, file_path in self._files.values():
            if file_path == path:
                return web.Response(body=doc.content, content_type="application/octet-stream")
        return web.Response(status=404, text="Not Found")

    async def _m_getme(self, params: dict[str, Any]) -> Any:
        return self.bot_user

    async def _m_logout(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_close(self, params: dict[str, Any]) -> Any:
        return True

    async def _m_deletewebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = None
        if params.get("drop_pending_updates"):
            self._pending.clear()
        return True

    async def _m_setwebhook(self, params: dict[str, Any]) -> Any:
        if not str(params.get("url", "")).startswith(("http://", "https://")):
            raise ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        self.webhook = {
            k: params.get(k) for k in ("url", "secret_token", "allowed_updates", "max_connections")
        }
        if params.get("drop_pending_updates"):
            self._pending.clear()
        return True

    async def _m_getwebhookinfo(self, params: dict[str, Any]) -> Any:
        url = self.webhook["url"] if self.webhook else ""
        return {"url": url, "has_custom_certificate": False, "pending_update_count": len(self._pending)}

    async def _m_getupdates(self, params: dict[str, Any]) -> Any:
        if self.webhook is not None:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        with self._polls.poll():  # 409 while another poller is waiting, as Telegram does
            offset = int(params.get("offset") or 0)
            if offset > 0:
                self._pending = [u for u in self._pending if u["update_id"] >= offset]
                self.acked_offset = max(self.acked_offset, offset)
            limit = int(params.get("limit") or 100)
            wait = min(float(params.get("timeout") or 0), self.long_poll_cap)
            await self._polls.wait(lambda: bool(self._pending), self._new_update, wait)
            return [u for u in self._pending if u["update_id"] >= offset][:limit]

    async def _m_sendmessage(self, params: dict[str, Any]) -> Any:
        chat_id = chat_key(params.get("chat_id"))
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        self._check_flood(chat_id)
        plain, entities = self._render(text, params.get("parse_mode"))
        thread = params.get("message_thread_id")
        if thread is not None and int(thread) not in self._threads[chat_id]:
            raise ApiError(400, "Bad Request: message thread not found")
        reply = params.get("reply_parameters")
        if (
            isinstance(reply, dict)
            and (chat_id, int(reply["message_id"])) not in self._messages
            and not reply.get("allow_sending_without_reply")
        ):
            raise ApiError(400, "Bad Request: message to be replied not found")
        message = self._bot_message(chat_id, plain, entities, thread)
        self.sent.append(
            SentMessage(
                chat_id=chat_id,
                text=text,
                parse_mode=params.get("parse_mode"),
                message_thread_id=None if thread is None else int(thread),
                reply_parameters=reply if isinstance(reply, dict) else None,
                message_id=message["message_id"],
                plain_text=plain,
                entities=entities,
                params=params,
            )
        )
        return message

    async def _m_editmessagetext(self, params: dict[str, Any]) -> Any:
        key = (chat_key(params.get("chat_id")), int(params.get("message_id") or 0))
        message = self._messages.get(key)
        if message is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != self.bot_user["id"]:
            raise ApiError(400, "Bad Request: message can't be edited")
        plain, entities = self._render(str(params.get("text", "")), params.get("parse_mode"))
        if plain == message.get("text") and entities == message.get("entities", []):
            raise ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup "
                "are exactly the same as a current content and reply markup of the message",
            )
        self._check_flood(key[0])
        message.update(text=plain, entities=entities, edit_date=int(time.time()))
        self.edits.append((key[0], key[1], plain, time.monotonic()))
        for sent in self.sent:  # ``sent`` shows what the user sees now
            if (sent.chat_id, sent.message_id) == key:
                sent.text, sent.plain_text, sent.entities = str(params.get("text", "")), plain, entities
                sent.parse_mode = params.get("parse_mode")
        return message

    async def _m_sendmessagedraft(self, params: dict[str, Any]) -> Any:
        """A streaming preview: private chats only, a non-zero ``draft_id``, 1-4096 characters after
        entity parsing; it is no message (no id, nothing in ``sent``) and lapses on its own."""
        chat_id = chat_key(params.get("chat_id"))
        chat = self._chats.get(chat_id)
        private = chat["type"] == "private" if chat else isinstance(chat_id, int) and chat_id > 0
        if not private:
            raise ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        try:
            draft_id = int(params.get("draft_id") or 0)
        except (TypeError, ValueError):
            draft_id = 0
        if draft_id == 0:
            raise ApiError(400, "Bad Request: invalid draft_id specified")
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "Bad Request: text must be non-empty")
        self._check_flood(chat_id)
        plain, _ = self._render(text, params.get("parse_mode"))
        thread = params.get("message_thread_id")
        if thread is not None and int(thread) not in self._threads[chat_id]:
            raise ApiError(400, "Bad Request: message thread not found")
        self.drafts.append((chat_id, draft_id, plain, time.monotonic()))
        return True

    def message_text(self, chat_id: int | str, message_id: int) -> str:
        """What one of the chat's messages shows now (after edits), as plain text."""
        return str(self._messages[(chat_id, message_id)]["text"])

    async def _m_sendchataction(self, params: dict[str, Any]) -> Any:
        self.actions.append(params)
        return True

    async def _m_setmycommands(self, params: dict[str, Any]) -> Any:
        commands = params.get("commands") or []
        for command in commands:
            if not re.fullmatch(r"[a-z0-9_]{1,32}", str(command.get("command", ""))):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self.commands = list(commands)
        return True

    async def _m_getmycommands(self, params: dict[str, Any]) -> Any:
        return self.commands

    async def _m_getfile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id"))
        if file_id not in self._files:
            raise ApiError(400, "Bad Request: invalid file_id")
        doc, path = self._files[file_id]
        size = doc.size if doc.size is not None else len(doc.content)
        if size > MAX_DOWNLOAD_BYTES:
            raise ApiError(400, "Bad Request: file is too big")
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": size, "file_path": path}

    # --- helpers --------------------------------------------------------------------------------

    def _render(self, text: str, parse_mode: Any) -> tuple[str, list[dict[str, Any]]]:
        entities: list[dict[str, Any]] = []
        if parse_mode is None:
            plain = text
        elif str(parse_mode).upper() == "HTML":
            try:
                plain, entities = parse_html(text)
            except EntityParseError as exc:
                raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        else:
            raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r} in this fake")
        if not plain.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_units(plain) > MAX_MESSAGE_UNITS:
            raise ApiError(400, "Bad Request: message is too long")
        return plain, entities

    def _check_flood(self, chat_id: int | str) -> None:
        if self.limits is not None:
            chat = self._chats.get(chat_id)
            group = chat["type"] != "private" if chat else not (isinstance(chat_id, int) and chat_id > 0)
            wait = self.limits.admit(chat_id, group=group)
            if wait is not None:
                raise ApiError(429, f"Too Many Requests: retry after {wait}", retry_after=wait)
        if self.flood_limit is None:
            return
        count, window = self.flood_limit
        now = time.monotonic()
        recent = self._flood[chat_id]
        while recent and now - recent[0] >= window:
            recent.popleft()
        if len(recent) >= count:
            wait = max(1, math.ceil(window - (now - recent[0])))
            raise ApiError(429, f"Too Many Requests: retry after {wait}", retry_after=wait)
        recent.append(now)

    def _chat(self, chat_id: int, chat_type: str, *, forum: bool) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat.update(first_name="Alice", username="alice")
        else:
            chat["title"] = f"Test {chat_type} {chat_id}"
            if forum:
                chat["is_forum"] = True
        self._chats[chat_id] = chat
        return chat

    def _bot_message(
        self, chat_id: int | str, text: str, entities: list[dict[str, Any]], thread: Any
    ) -> dict[str, Any]:
        chat = self._chats.get(chat_id) or {
            "id": chat_id,
            "type": "private" if isinstance(chat_id, int) and chat_id > 0 else "supergroup",
        }
        mid = next(self._message_ids[chat_id])
        message: dict[str, Any] = {
            "message_id": mid,
            "date": int(time.time()),
            "chat": chat,
            "from": self.bot_user,
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if thread is not None:
            message.update(message_thread_id=int(thread), is_topic_message=True)
        self._messages[(chat_id, mid)] = message
        return message

    def _last_bot_message(self, chat_id: int, chat: dict[str, Any], thread: int | None) -> dict[str, Any]:
        for (cid, _), message in reversed(self._messages.items()):
            if cid == chat_id and message.get("from", {}).get("id") == self.bot_user["id"]:
                return message
        return self._bot_message(chat_id, "an earlier answer", [], thread)

    def _register(self, doc: FakeDocument, folder: str) -> tuple[str, str]:
        n = next(self._file_ids)
        file_id = f"FILE{n:04d}{folder}"
        self._files[file_id] = (doc, f"{folder}/file_{n}_{doc.file_name}")
        return file_id, f"uniq{n}"

    def _register_document(self, doc: FakeDocument) -> dict[str, Any]:
        file_id, unique = self._register(doc, "documents")
        out: dict[str, Any] = {
            "file_id": file_id,
            "file_unique_id": unique,
            "file_name": doc.file_name,
            "file_size": doc.size if doc.size is not None else len(doc.content),
        }
        if doc.mime_type:
            out["mime_type"] = doc.mime_type
        return out

    def _register_photo(self, data: bytes) -> list[dict[str, Any]]:
        """PhotoSize entries as Telegram makes them: JPEG renditions up to 90, 320, 800 and 1280 px
        (never larger than the original); bytes that are no picture keep the old two fake sizes."""
        try:
            original = Image.open(io.BytesIO(data))
            original.load()
        except (UnidentifiedImageError, OSError):
            renditions = [(90, 90, data[:64]), (1280, 1280, data)]
        else:
            renditions = []
            for edge in (90, 320, 800, 1280):
                copy = original.convert("RGB")
                copy.thumbnail((edge, edge))
                out = io.BytesIO()
                copy.save(out, format="JPEG", quality=87)
                renditions.append((copy.width, copy.height, out.getvalue()))
                if max(original.size) <= edge:
                    break
        sizes = []
        for width, height, content in renditions:
            file_id, unique = self._register(FakeDocument("photo.jpg", content, "image/jpeg"), "photos")
            sizes.append(
                {
                    "file_id": file_id,
                    "file_unique_id": unique,
                    "width": width,
                    "height": height,
                    "file_size": len(content),
                }
            )
        return sizes

    async def _wait(self, done: Any, timeout: float, what: str) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            await asyncio.sleep(0.02)
