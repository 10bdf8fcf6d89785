"""Streamed replies in private chats as drafts (Bot API ``sendMessageDraft``).

A draft is a live preview of a message being written, shown in a private chat only: it is no
message (no id, nothing to edit or delete), successive drafts with one ``draft_id`` are
animated, and a draft not sent again lapses after about 30 seconds. The reply itself is sent
once, whole, with ``sendMessage``. A chat where Telegram refuses drafts (a 400: the bot lacks
the feature, the chat is not private after all) is remembered for the life of the process and
its replies are edited in place as before.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram.constants import ParseMode
from telegram.error import BadRequest, RetryAfter, TelegramError

from gateway.config import TelegramSettings
from gateway.errors import AdapterError, DraftRefused
from gateway.platforms.base import OutboundTarget
from gateway.platforms.telegram_bot.format import to_telegram_html

_log = logging.getLogger(__name__)


class TelegramDrafts:
    """The draft half of the Telegram adapter (mixed into it)."""

    _settings: TelegramSettings
    _no_drafts: set[str]

    def _require_app(self) -> Any:
        raise NotImplementedError

    @property
    def draft_refresh_seconds(self) -> float:
        return self._settings.draft_refresh_seconds

    def drafts(self, target: OutboundTarget) -> bool:
        """Private chats (a positive chat id) outside topics, unless Telegram refused a draft there."""
        private = target.chat_id.isdigit() and int(target.chat_id) > 0
        return (
            self._settings.drafts
            and private
            and not target.thread_id
            and target.chat_id not in self._no_drafts
        )

    async def draft(self, target: OutboundTarget, draft_id: int, text: str) -> None:
        """sendMessageDraft as HTML (the plain original if the formatting is refused)."""
        app = self._require_app()
        for body, mode in ((to_telegram_html(text), ParseMode.HTML), (text, None)):
            try:
                await app.bot.send_message_draft(int(target.chat_id), draft_id, body, parse_mode=mode)
                return
            except BadRequest as exc:
                reason = str(exc).lower()
                if mode is not None and "can't parse entities" in reason:
                    continue
                if "empty" in reason:
                    return  # formats to nothing yet (a lone fence): no preview, but drafts are fine
                self._no_drafts.add(target.chat_id)
                _log.warning("telegram: no drafts in chat %s (%s)", target.chat_id, exc)
                raise DraftRefused(f"Telegram refused the draft: {exc}") from exc
            except RetryAfter as exc:
                raise AdapterError(f"Telegram flood limit on drafts: retry after {exc.retry_after}") from exc
            except TelegramError as exc:
                raise AdapterError(f"Telegram draft failed: {exc}") from exc
