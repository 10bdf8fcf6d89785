"""Per-chat personas and models: which ``overrides:`` entries apply to a chat, most specific first.

An entry names a platform and a chat, optionally a thread. For a message in a thread, an entry for
that thread beats one for the whole chat; a setting the thread's entry leaves unset comes from the
chat's entry, then from the service's settings. An admin may set entries too (the admin page,
``admin_overrides``): at the same level (thread, or whole chat) the admin's entry beats the
config's, and it is named ``admin <platform>:<chat>`` (docs/decisions.md).

What applies is resolved when a session starts and frozen for its life (the system prompt and
model in their columns, the rest in ``sessions.chat_overrides``): the cached prefix never changes
under a conversation, and a changed entry applies from the next session (``/new``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent.tools.scope import ToolFilter
from gateway.config import ChatOverride, Settings, ToolGlobs
from gateway.store.override_ops import AdminOverride

NoticeMode = Literal["off", "on_failure", "always"]


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """The settings a chat's new session starts with; ``match`` names the entries that applied."""

    system_prompt: str
    model: str
    summary_model: str | None = None
    budget_tokens: int | None = None
    compaction_notice: NoticeMode | None = None
    tools: ToolGlobs | None = None
    match: tuple[str, ...] = ()

    def frozen(self) -> dict[str, Any] | None:
        """What goes into ``sessions.chat_overrides`` (None when no entry applied)."""
        if not self.match:
            return None
        return {
            "summary_model": self.summary_model,
            "budget_tokens": self.budget_tokens,
            "tools": None if self.tools is None else self.tools.model_dump(),
            "match": list(self.match),
        }


def entry_name(entry: ChatOverride) -> str:
    """How an entry is shown (``/status``, logs): platform:chat[:thread]."""
    return f"{entry.platform}:{entry.chat}" + (f":thread:{entry.thread}" if entry.thread else "")


def matching(
    entries: Sequence[ChatOverride], platform: str, chat_id: str, thread_id: str | None
) -> list[ChatOverride]:
    """The entries for this chat, most specific (thread) first, then config order."""
    found = [
        e
        for e in entries
        if e.platform == platform and e.chat == chat_id and (e.thread is None or e.thread == thread_id)
    ]
    return sorted(found, key=lambda e: e.thread is None)  # stable: config order within a rank


def as_entry(row: AdminOverride) -> ChatOverride:
    """An admin-set override as an ``overrides:`` entry (validated when the admin set it)."""
    return ChatOverride.model_construct(
        platform=row.platform,
        chat=row.chat,
        thread=row.thread,
        system_prompt=row.system_prompt,
        model=row.model,
        summary_model=row.summary_model,
        budget_tokens=row.budget_tokens,
        compaction_notice=None,
        tools=None if not row.tools else ToolGlobs.model_validate(row.tools),
    )


def ranked(
    entries: Sequence[ChatOverride],
    platform: str,
    chat_id: str,
    thread_id: str | None,
    admin: Sequence[AdminOverride] = (),
) -> list[tuple[str, ChatOverride]]:
    """(name, entry) of every entry for this chat, most specific first; at the same level the
    admin's before the config's."""
    mine = [
        (f"admin {entry_name(e)}", e)
        for e in matching([as_entry(a) for a in admin], platform, chat_id, thread_id)
    ]
    config = [(entry_name(e), e) for e in matching(entries, platform, chat_id, thread_id)]
    return sorted([*mine, *config], key=lambda pair: pair[1].thread is None)  # stable


def resolve(
    entries: Sequence[ChatOverride],
    platform: str,
    chat_id: str,
    thread_id: str | None,
    *,
    system_prompt: str,
    model: str,
    admin: Sequence[AdminOverride] = (),
) -> ChatSettings:
    """What a new session of this chat starts with (``system_prompt`` and ``model``: the service's;
    ``admin``: the chat's admin-set overrides)."""
    named = ranked(entries, platform, chat_id, thread_id, admin)
    found = [e for _, e in named]

    def first(name: str) -> Any:
        return next((getattr(e, name) for e in found if getattr(e, name) is not None), None)

    return ChatSettings(
        system_prompt=first("system_prompt") or system_prompt,
        model=first("model") or model,
        summary_model=first("summary_model"),
        budget_tokens=first("budget_tokens"),
        compaction_notice=first("compaction_notice"),
        tools=first("tools"),
        match=tuple(name for name, _ in named),
    )


def chat_notice_mode(
    settings: Settings, platform: str, chat_id: str, thread_id: str | None
) -> NoticeMode | None:
    """The chat's own ``compaction_notice`` (read live: it does not touch the cached prefix)."""
    found = matching(settings.overrides, platform, chat_id, thread_id)
    return next((e.compaction_notice for e in found if e.compaction_notice is not None), None)


def frozen_tool_filter(frozen: dict[str, Any] | None) -> ToolFilter:
    """The MCP-tool narrowing a session started with (its ``chat_overrides``; none: no narrowing)."""
    tools = (frozen or {}).get("tools")
    if not isinstance(tools, dict):
        return ToolFilter()
    return ToolFilter(tuple(tools.get("include") or ()), tuple(tools.get("exclude") or ()))
