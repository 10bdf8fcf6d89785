"""Per-chat overrides an admin sets on the admin page: validated, kept, audited.

An admin-set entry sits beside the config's ``overrides:``: at the same level (a thread, or the
whole chat) it wins, and a more specific entry from either source beats a less specific one
(docs/decisions.md). Like the config's, it is resolved when a chat's session starts and frozen
for that session, so it applies from ``/new`` or the chat's next session, never mid-conversation.
A model must be one the service knows (the model table in agent/tokens.py, or a ``models:``
entry of the config): an unknown name is a 400 that says so, not a session that fails later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agent.errors import NotFound
from agent.tokens import MODELS, closest_model, model_info
from gateway.admin.actions import MAX_ID_CHARS, Outcome
from gateway.admin.errors import BadRequest
from gateway.config import ChatOverride
from gateway.store.override_ops import AdminOverride
from gateway.store.repository import Store

MAX_PROMPT_CHARS = 20_000
SETTINGS = ("system_prompt", "model", "summary_model", "budget_tokens", "tools")
KnownModel = Callable[[str], bool]


def table_model(model: str) -> bool:
    """Whether ``model`` is in the model table (agent/tokens.py) by a full model name."""
    return model_info(model).known


def known_models() -> list[str]:
    """The full model names of the table (family-only keys such as ``opus`` are not models)."""
    return [name for name, info in MODELS.items() if info.known]


def _text(value: Any, name: str, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name}: a text value")
    value = value.strip()
    if "\x00" in value or len(value) > limit:
        raise BadRequest(f"{name}: at most {limit:,} characters, no NUL")
    return value or None


def _budget(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise BadRequest("budget_tokens: a whole number of tokens (at least 1,000)")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadRequest("budget_tokens: a whole number of tokens (at least 1,000)") from None


MAX_GLOBS = 50


def _globs(value: Any, name: str) -> list[str]:
    """Globs from a list (the API) or one text of comma- or line-separated ones (the form)."""
    if value is None or value == "":
        return []
    items = value.replace("\n", ",").split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or len(items) > MAX_GLOBS:
        raise BadRequest(f"{name}: at most {MAX_GLOBS} globs, as a list or separated by commas")
    globs = [_text(item, name, 128) for item in items]
    return [g for g in globs if g]


def _tools(values: dict[str, Any]) -> dict[str, list[str]] | None:
    given = values.get("tools")
    if given is not None and not isinstance(given, dict):
        raise BadRequest("tools: an object {include: [globs], exclude: [globs]}")
    include = _globs((given or {}).get("include", values.get("tools_include")), "tools.include")
    exclude = _globs((given or {}).get("exclude", values.get("tools_exclude")), "tools.exclude")
    return {"include": include, "exclude": exclude} if include or exclude else None


def checked_override(values: dict[str, Any], known_model: KnownModel) -> AdminOverride:
    """An override from what the admin sent (a form's or the API's fields); BadRequest in one line
    naming what is wrong."""
    platform = _text(values.get("platform"), "platform", MAX_ID_CHARS)
    chat = _text(values.get("chat"), "chat", MAX_ID_CHARS)
    if platform is None or chat is None:
        raise BadRequest("platform and chat: required (the chat id as the platform gives it)")
    if ":" in platform:
        raise BadRequest(f"platform: no platform name holds ':' ({platform[:40]!r})")
    fields: dict[str, Any] = {
        "thread": _text(values.get("thread"), "thread", MAX_ID_CHARS),
        "system_prompt": _text(values.get("system_prompt"), "system_prompt", MAX_PROMPT_CHARS),
        "model": _text(values.get("model"), "model", 128),
        "summary_model": _text(values.get("summary_model"), "summary_model", 128),
        "budget_tokens": _budget(values.get("budget_tokens")),
        "tools": _tools(values),
    }
    if all(fields[name] is None for name in SETTINGS):
        raise BadRequest(f"set at least one of {', '.join(SETTINGS)} (to remove an override, clear it)")
    for name in ("model", "summary_model"):
        model = fields[name]
        if model is not None and not known_model(model):
            guess = closest_model(model)
            hint = f" (did you mean {guess}?)" if guess else ""
            raise BadRequest(
                f"{name}: unknown model {model!r}{hint}; known: {', '.join(known_models())} "
                "(or add it under models: in the config)"
            )
    try:
        entry = ChatOverride.model_validate({"platform": platform, "chat": chat, **fields})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "override"
        raise BadRequest(f"{where}: {first.get('msg', 'invalid value')}") from None
    return AdminOverride(
        platform=entry.platform,
        chat=entry.chat,
        thread=entry.thread,
        system_prompt=entry.system_prompt,
        model=entry.model,
        summary_model=entry.summary_model,
        budget_tokens=entry.budget_tokens,
        tools=None if entry.tools is None else entry.tools.model_dump(),
    )


def target(platform: str, chat: str, thread: str | None) -> str:
    return f"{platform}:{chat}" + (f":thread:{thread}" if thread else "")


def describe(entry: AdminOverride) -> str:
    """The settings in one line, for the audit trail (a prompt by its length and its start)."""
    parts = []
    if entry.system_prompt is not None:
        start = entry.system_prompt[:80] + ("…" if len(entry.system_prompt) > 80 else "")
        parts.append(f"system prompt of {len(entry.system_prompt):,} characters ({start!r})")
    if entry.model:
        parts.append(f"model {entry.model}")
    if entry.summary_model:
        parts.append(f"summary model {entry.summary_model}")
    if entry.budget_tokens:
        parts.append(f"budget {entry.budget_tokens:,} tokens")
    if entry.tools:
        parts.append(f"MCP tools {tools_text(entry.tools)}")
    return ", ".join(parts)


def tools_text(tools: dict[str, list[str]]) -> str:
    """``include a, b; exclude c`` (what an override's ``tools`` keeps of the MCP tools)."""
    parts = [f"{key} {', '.join(tools[key])}" for key in ("include", "exclude") if tools.get(key)]
    return "; ".join(parts)


def override_json(entry: AdminOverride | ChatOverride, source: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": source,
        "platform": entry.platform,
        "chat": entry.chat,
        "thread": entry.thread,
        **{name: getattr(entry, name) for name in SETTINGS},
    }
    if isinstance(entry, ChatOverride) and entry.tools is not None:
        out["tools"] = entry.tools.model_dump()
    if isinstance(entry, AdminOverride):
        out["updated_at"] = entry.updated_at.isoformat() if entry.updated_at else None
        out["updated_by"] = entry.updated_by
    return out


@dataclass
class OverrideActions:
    """Set, clear and list the admin's overrides over ``store``; ``config`` is the service's
    ``overrides:`` (shown beside them, read-only)."""

    store: Store
    known_model: KnownModel
    config: Sequence[ChatOverride] = field(default_factory=tuple)

    async def set(self, values: dict[str, Any], *, actor: str) -> tuple[Outcome, AdminOverride]:
        entry = checked_override(values, self.known_model)
        previous = await self.store.set_admin_override(entry, actor=actor)
        name = target(entry.platform, entry.chat, entry.thread)
        message = (
            f"{'Replaced' if previous else 'Set'} the override of {name}: {describe(entry)}. "
            "It applies from the chat's next session (/new)."
        )
        detail = message + (f" Before: {describe(previous)}." if previous else "")
        audit = await self.store.record_action(
            "admin_override_set", actor=actor, platform=entry.platform, detail=detail, counts={}
        )
        return Outcome(message, audit), entry

    async def clear(self, values: dict[str, Any], *, actor: str) -> Outcome:
        platform = _text(values.get("platform"), "platform", MAX_ID_CHARS)
        chat = _text(values.get("chat"), "chat", MAX_ID_CHARS)
        if platform is None or chat is None:
            raise BadRequest("platform and chat: required")
        thread = _text(values.get("thread"), "thread", MAX_ID_CHARS)
        name = target(platform, chat, thread)
        previous = await self.store.clear_admin_override(platform, chat, thread)
        if previous is None:
            raise NotFound(f"{name} has no admin-set override to clear")
        message = (
            f"Cleared the override of {name} (was: {describe(previous)}). The chat's next session "
            "(/new) starts with the config's settings."
        )
        audit = await self.store.record_action(
            "admin_override_clear", actor=actor, platform=platform, detail=message, counts={}
        )
        return Outcome(message, audit)
