"""What a chat is told about the compactions run during its turns (``sessions.compaction_notice``).

``always``: one line when a compaction starts (once it has run a few seconds) and one when it
finishes; ``on_failure`` (the default): only the line saying a compaction failed and the
conversation goes on unsummarized (plus the "being summarized" line when one runs long);
``off``: nothing. The mode is the chat's override, else the platform's
(``telegram.compaction_notice``, ``discord.compaction_notice``), else ``sessions.compaction_notice``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from agent.compaction import WhenSlow
from agent.types import Trigger
from gateway.config import Settings
from gateway.outbound.failures import SUMMARIZING

NoticeMode = Literal["off", "on_failure", "always"]
Say = Callable[[str], Awaitable[None]]

STARTED = "Summarizing the earlier conversation, one moment."
FAILED = (
    "I could not summarize the earlier conversation just now, so I am carrying on without a summary; "
    "nothing was lost."
)


def finished(archived: int) -> str:
    """The line after a compaction: how much was summarized, and that it can still be looked up."""
    noun = "message" if archived == 1 else "messages"
    return f"Summarized {archived} earlier {noun}; I can still look them up."


def notice_mode(settings: Settings, platform: str, chat_override: NoticeMode | None = None) -> NoticeMode:
    """The mode for a chat on ``platform``: the chat's override, the platform's, the default."""
    if chat_override is not None:
        return chat_override
    platform_mode: NoticeMode | None = None
    if platform == "telegram":
        platform_mode = settings.telegram.compaction_notice
    elif platform == "discord":
        platform_mode = settings.discord.compaction_notice
    return platform_mode or settings.sessions.compaction_notice


def compaction_notices(mode: NoticeMode, say: Say, slow_after: float) -> WhenSlow:
    """The hooks a turn hands to every compaction it runs, saying each line through ``say``.

    The failure line is said once per turn. With ``always`` the start line stands in for the
    "being summarized" line: said once a compaction has run ``slow_after`` seconds (one that is
    over sooner, or finds nothing to do, is not announced: a start line with nothing after it, or
    two lines a second apart, would be noise).
    """
    told_slow = told_failure = False

    async def slow() -> None:
        nonlocal told_slow
        if mode == "always":
            await say(STARTED)
        elif mode == "on_failure" and not told_slow:
            told_slow = True
            await say(SUMMARIZING)

    async def end(trigger: Trigger, archived: int | None) -> None:
        nonlocal told_failure
        if archived is None:
            if mode != "off" and not told_failure:
                told_failure = True
                await say(FAILED)
        elif mode == "always":
            await say(finished(archived))

    return WhenSlow(slow, slow_after, on_end=end)
