"""Group manners shared by every platform: whether a message from another bot gets an answer.

A message from another bot is answered only when ``sessions.answer_bots`` is on, and then at most
``sessions.max_consecutive_bot_replies`` in a row per chat (thread): two bots that mention each
other would otherwise talk forever. A message from a person in the chat starts the count again.
A bot message not answered still joins the conversation as ambient context.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import replace

from gateway.platforms.base import InboundMessage

_log = logging.getLogger(__name__)

_MAX_CHATS = 10_000  # counters kept; the oldest chat's count is forgotten first


class BotManners:
    """Decides, at intake, whether an addressed message from another bot is still addressed."""

    def __init__(self, *, answer_bots: bool, max_consecutive: int) -> None:
        self._answer_bots = answer_bots
        self._max = max_consecutive
        self._streaks: OrderedDict[tuple[str, str, str | None], int] = OrderedDict()

    def judge(self, msg: InboundMessage) -> InboundMessage:
        """``msg``, made unaddressed when it is a bot's message we must not answer."""
        chat = (msg.platform, msg.chat_id, msg.thread_id)
        if not msg.from_bot:
            self._streaks.pop(chat, None)
            return msg
        if not msg.addressed:
            return msg
        if not self._answer_bots:
            _log.info(
                "not answering another bot (sessions.answer_bots is off)", extra={"platform": msg.platform}
            )
            return replace(msg, addressed=False)
        streak = self._streaks.pop(chat, 0)
        self._streaks[chat] = streak
        if streak >= self._max:
            _log.warning(
                "not answering another bot: %d bot messages answered in a row in this chat",
                streak,
                extra={"platform": msg.platform},
            )
            return replace(msg, addressed=False)
        self._streaks[chat] = streak + 1
        while len(self._streaks) > _MAX_CHATS:
            self._streaks.popitem(last=False)
        return msg
