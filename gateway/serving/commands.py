"""Chat commands: ``/new``, ``/compact [focus]``, ``/forget [N]``, ``/context``, ``/usage``,
``/status``, ``/stop``, ``/tasks``, ``/cancel ID``, ``/help``, and the admin-only ``/restore``.

Commands are stored in the inbox like any message but never reach the model. ``/stop`` acts
at intake (it must not wait behind the turn it stops); the others run in the session's
order, between turns. Every handler returns the one reply text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, timedelta

from agent.clock import Clock, utcnow
from agent.compaction import compact, forget, with_api_limit
from agent.context_engine import ContextEngine
from agent.engines.strategies.snip import SnipRefused
from agent.errors import CompressionError, LLMError, NotFound
from agent.server_context import STRATEGIES_KEY
from agent.settings import CompressionSettings
from agent.tasks import TaskRejected
from agent.tokens import estimate_tokens
from agent.tools.schedule import task_line
from agent.tools.scope import ToolScope
from agent.types import AgentSession, ChatMessage, CompactionRecord, ContextState, effective_budget
from gateway.platforms.base import CommandSpec
from gateway.scheduling.tasks import TaskBook
from gateway.serving.tool_view import ToolView
from gateway.store.engine_ops import SessionStrategyRuns, strategy_overview
from gateway.store.records import SessionInfo
from gateway.store.repository import Store
from gateway.wire import focus_quote

_log = logging.getLogger(__name__)

HELP: dict[str, str] = {
    "new": "start a fresh conversation (the current one stays searchable)",
    "compact": "summarize the older part of this conversation now (/compact budget: focus on the budget)",
    "forget": "set the last N exchanges aside (default 1); still searchable, an admin can restore them",
    "context": "how full the model's window is: system, memory, summary, history, tool output, tools, free",
    "usage": "tokens, cache hit rate and cost of this conversation",
    "status": "model, age, messages, compactions",
    "stop": "stop the answer in progress",
    "tasks": "this chat's reminders and recurring tasks",
    "cancel": "cancel one of them: /cancel ID",
    "help": "this list",
}
ADMIN_HELP: dict[str, str] = {"restore": "undo the latest compaction of this conversation"}
ALIASES = {"start": "help"}
IMMEDIATE = frozenset({"stop", "new"})
"""Commands that cancel the running turn at once, on whichever worker runs it (then served in order)."""
ARGUMENTS: dict[str, tuple[str, str, bool]] = {
    "compact": ("focus", "what the summary should keep in particular", False),
    "cancel": ("id", "the reminder to cancel (its id from /tasks)", True),
    "forget": ("n", "how many of the latest exchanges to set aside (default 1)", False),
}
"""Commands that take an argument: (option name, description, required), for native command menus."""
PRIVATE = frozenset({"context", "usage", "status", "tasks", "help"})
"""Answers only for the one who asked (Discord: ephemeral); the rest change the shared conversation."""
SLOW = frozenset({"compact"})
"""May take longer than a platform's answer window (a summarizer call)."""
BAR_WIDTH = 30


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    args: str


def command_in(text: str, *, addressed: bool) -> Command | None:
    """The one rule for "is this a command?": a known ``/command`` in a message addressed to the bot.

    In a group, ``/new`` said to someone else is only text. Intake asks it of a new message (to stop
    a running turn at once); :func:`gateway.serving.inbound.parse_item` asks it once per inbox item.
    """
    return parse_command(text) if addressed else None


def parse_command(text: str) -> Command | None:
    """``/name[@bot] args`` for a command we know; anything else is a message for the model."""
    stripped = text.strip()
    if not stripped.startswith("/") or len(stripped) < 2:
        return None
    head, _, args = stripped[1:].partition(" ")
    name = head.split("@", 1)[0].lower()
    name = ALIASES.get(name, name)
    if name not in HELP and name not in ADMIN_HELP:
        return None
    return Command(name, args.strip())


def command_specs() -> list[CommandSpec]:
    """Every user command of :data:`HELP` (admin ones stay text-only) as platforms register them."""
    specs: list[CommandSpec] = []
    for name, text in HELP.items():
        option, option_text, required = ARGUMENTS.get(name, (None, "", False))
        specs.append(
            CommandSpec(
                name,
                text[:100],
                argument=option,
                argument_description=option_text,
                argument_required=required,
                private=name in PRIVATE,
                slow=name in SLOW,
            )
        )
    return specs


@dataclass(slots=True)
class CommandContext:
    """What a command may look at or change: the session, its store, the engine."""

    store: Store
    engine: ContextEngine
    compression: CompressionSettings
    session: AgentSession
    info: SessionInfo
    is_admin: bool
    tool_tokens: int = 0
    memory_tokens: int = 0
    clock: Clock = utcnow
    tasks: TaskBook | None = None
    next_model: Callable[[], Awaitable[str]] | None = None
    """The model a new session of this chat would start with (``/status`` compares)."""
    tools: ToolView | None = None
    scope: ToolScope | None = None
    """Who the command's chat turns serve: which tools its sessions are offered."""


Handler = Callable[[CommandContext, str], Awaitable[str]]


async def run_command(ctx: CommandContext, command: Command) -> str:
    """Run ``command`` (never ``/stop``: the gateway handles it) and return the reply text."""
    if command.name in ADMIN_HELP and not ctx.is_admin:
        return f"/{command.name} is for admins only."
    handler = _HANDLERS.get(command.name)
    if handler is None:
        return f"/{command.name} is handled elsewhere."
    return await handler(ctx, command.args)


async def _new(ctx: CommandContext, _: str) -> str:
    await ctx.store.end_session(ctx.info.id, "new")
    return "Started a new conversation. The previous one is kept and still searchable."


async def _compact(ctx: CommandContext, focus: str) -> str:
    # Measured as /context measures it (tool definitions included), so the two agree on "before".
    before = await _context_used(ctx)
    try:
        result = await compact(
            ctx.engine, ctx.store, ctx.session, trigger="manual", focus=focus or None, prompt_tokens=before
        )
    except (CompressionError, LLMError) as exc:
        _log.warning("manual compaction failed: %s", exc, extra={"session": ctx.session.id})
        return "I couldn't summarize the conversation right now; nothing was changed. Try again in a while."
    if result.record is None:
        reason = result.outcome.reason or "nothing to compact yet"
        return f"Nothing was compacted ({reason})."
    record = result.record
    summaries = sum(1 for m in result.messages if m.kind == "summary")
    focus_note = focus_quote(focus) if focus else ""
    return (
        f"Compacted {record.messages_archived} messages -> {summaries} summary + "
        f"{len(result.messages) - summaries} "
        f"({record.tokens_before:,} -> {record.tokens_after:,} tokens{focus_note})."
    )


def context_breakdown(
    session: AgentSession,
    messages: list[ChatMessage],
    state: ContextState,
    *,
    tool_tokens: int,
    memory_tokens: int,
) -> list[tuple[str, int]]:
    """(part, tokens) for system, memory, summary, history, tools and free; free is what is left
    of the effective budget (the room every threshold is a fraction of)."""
    system = estimate_tokens(session.system_prompt, state)
    summary = estimate_tokens([m for m in messages if m.kind == "summary"], state)
    # A tool round's results come back as a user message of tool_result blocks alone.
    output = estimate_tokens([m for m in messages if m.kind != "summary" and m.tool_result_ids()], state)
    history = estimate_tokens([m for m in messages if m.kind != "summary" and not m.tool_result_ids()], state)
    used = system + memory_tokens + summary + history + output + tool_tokens
    free = max(0, session.budget_window - used)
    return [
        ("system", system),
        ("memory", memory_tokens),
        ("summary", summary),
        ("history", history),
        ("tool out", output),
        ("tools", tool_tokens),
        ("free", free),
    ]


def room_words(window: int, budget: int | None) -> str:
    """What the thresholds are fractions of, in words: ``the 200,000-token budget (window
    1,000,000)``, or the window when there is no budget or the budget does not fit it."""
    room = effective_budget(window, budget)
    if budget is None:
        return f"the {window:,}-token window (no budget)"
    if budget > window:
        return f"the {room:,}-token window (budget {budget:,}, effective {room:,})"
    return f"the {room:,}-token budget (window {window:,})"


def budget_line(session: AgentSession, compression: CompressionSettings) -> str:
    """Where the two compaction thresholds sit, in tokens of the effective budget."""
    room = session.budget_window
    in_loop = compression.threshold_for(session.model)
    hygiene = compression.hygiene_threshold_for(session.model)
    return (
        f"Compaction at {int(in_loop * room):,} tokens during a turn ({100 * in_loop:.0f}%) and "
        f"{int(hygiene * room):,} before one ({100 * hygiene:.0f}%) of the budget."
    )


def render_bars(parts: list[tuple[str, int]], room: int, scope: str = "") -> str:
    """A text bar chart, one row per part: ``history  ████████░░░  12,345  6.2%``; shares are of
    ``room`` (the effective budget), which ``scope`` names (:func:`room_words`)."""
    used = sum(tokens for name, tokens in parts if name != "free")
    share_used = 100 * used / room if room else 0.0
    lines = [f"Context: {used:,} tokens ({share_used:.1f}%) of {scope or f'{room:,} tokens'}"]
    for name, tokens in parts:
        share = tokens / room if room else 0.0
        filled = min(BAR_WIDTH, round(share * BAR_WIDTH))
        if tokens and not filled:
            filled = 1
        bar = "█" * filled + "░" * (BAR_WIDTH - filled)
        lines.append(f"{name:<8} {bar} {tokens:>9,} {100 * share:5.1f}%")
    return "```\n" + "\n".join(lines) + "\n```"


async def _context_parts(ctx: CommandContext) -> tuple[AgentSession, ContextState, list[tuple[str, int]]]:
    """The session as the next call would see it, its state, and /context's parts."""
    messages = await ctx.store.load_active(ctx.session.id)
    state = await ctx.store.load_context_state(ctx.session.id)
    session = with_api_limit(ctx.session, state)  # the limit the API reported, when it is lower
    tool_tokens = ctx.tool_tokens
    if ctx.tools is not None and ctx.scope is not None:
        tool_tokens = ctx.tools.definition_tokens(ctx.scope, state)
    parts = context_breakdown(
        session, messages, state, tool_tokens=tool_tokens, memory_tokens=ctx.memory_tokens
    )
    return session, state, parts


async def _context_used(ctx: CommandContext) -> int:
    _, _, parts = await _context_parts(ctx)
    return sum(tokens for name, tokens in parts if name != "free")


async def _context(ctx: CommandContext, _: str) -> str:
    session, state, parts = await _context_parts(ctx)
    scope = room_words(session.context_window, session.budget_tokens)
    chart = render_bars(parts, session.budget_window, scope)
    chart += "\n" + budget_line(session, ctx.compression)
    last = await ctx.store.context_series(ctx.session.id, limit=1)
    if last and not last[-1].estimated:  # an offline provider's guess is no count
        chart += f"\nLast prompt as counted by the API: {last[-1].prompt_tokens:,} tokens."
    records = await ctx.store.list_compactions(ctx.session.id)
    lines = strategy_lines(records, await ctx.store.session_strategy_runs(ctx.session.id))
    return chart + "".join(f"\n{line}" for line in [*lines, *server_clearing_lines(state)])


def server_clearing_lines(state: ContextState) -> list[str]:
    """What the API's tool-result clearing did (it changes requests, not the store: no compaction row)."""
    runs = state.extra.get(STRATEGIES_KEY, {}).get("server_clearing")
    if not isinstance(runs, dict) or not runs.get("runs"):
        return []
    return [
        f"Cleared by the API (server_clearing): {int(runs.get('last_tokens_freed', 0)):,} tokens of "
        f"{int(runs.get('last_cleared_tool_uses', 0))} old tool results on the last call; "
        f"{int(runs.get('tokens_freed', 0)):,} tokens not sent over {int(runs['runs'])} calls."
    ]


def strategy_lines(records: list[CompactionRecord], runs: Sequence[SessionStrategyRuns] = ()) -> list[str]:
    """Which strategy ran last and how many tokens each freed (compactions still in force, and
    the API's clearing, which makes no compaction row)."""
    overview = strategy_overview(records, runs)
    if overview is None:
        return []
    totals = ", ".join(f"{name} {freed:,} ({n}x)" for name, n, freed in overview.totals)
    return [
        f"Last strategy: {overview.last} (freed {overview.last_freed:,} tokens)",
        f"Freed by strategy: {totals}",
    ]


MAX_FORGET = 50


async def _forget(ctx: CommandContext, args: str) -> str:
    word = args.split()[0] if args.split() else "1"
    if not word.isdigit() or not 1 <= int(word) <= MAX_FORGET:
        return f"How many exchanges? Send /forget N with N from 1 to {MAX_FORGET}."
    try:
        result = await forget(ctx.engine, ctx.store, ctx.session, last=int(word))
    except SnipRefused as exc:
        return f"Nothing was set aside ({exc})."
    record = result.record
    assert record is not None
    return (
        f"Set aside {record.messages_archived} messages ({record.tokens_freed:,} tokens). "
        "They stay searchable, and an admin can bring them back (/restore)."
    )


async def _usage(ctx: CommandContext, _: str) -> str:
    usage = await ctx.store.usage_summary(ctx.session.id)
    prompt = usage.input + usage.cache_write + usage.cache_read
    hit_rate = 100 * usage.cache_read / prompt if prompt else 0.0
    return (
        f"This conversation: {usage.calls:,} model calls, {prompt:,} prompt tokens "
        f"({usage.cache_read:,} read from cache: {hit_rate:.0f}% hit rate; {usage.cache_write:,} written), "
        f"{usage.output:,} output tokens, cost ${usage.cost_usd:.4f}."
    )


async def _status(ctx: CommandContext, _: str) -> str:
    active, archived = await ctx.store.message_counts(ctx.session.id)
    compactions = await ctx.store.list_compactions(ctx.session.id)
    age = _age(ctx.clock() - ctx.info.created_at)
    lines = [
        f"Model: {ctx.session.model} (window {ctx.session.context_window:,} tokens, "
        f"effective budget {ctx.session.budget_window:,})",
        *await _model_change_line(ctx),
        _override_line(ctx.info),
        f"Conversation started {age} ago",
        f"Messages: {active:,} active, {archived:,} archived",
        f"Compactions: {len(compactions)}",
        await _cache_share_line(ctx),
    ]
    if compactions:
        last = compactions[-1]
        when = last.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        restored = " (undone)" if last.restored_at else ""
        lines.append(
            f"Last compaction: {when}, {last.trigger}, {last.messages_archived} messages, "
            f"{last.tokens_before:,} -> {last.tokens_after:,} tokens{restored}"
        )
    if ctx.tools is not None:
        lines.extend(ctx.tools.server_lines())
    return "\n".join(lines)


async def _cache_share_line(ctx: CommandContext) -> str:
    """How much of this chat's prompt was read from the cache (what caching saves)."""
    usage = await ctx.store.usage_summary(ctx.session.id)
    prompt = usage.input + usage.cache_write + usage.cache_read
    if not prompt:
        return "Cache read share: no model calls yet"
    return f"Cache read share: {100 * usage.cache_read / prompt:.0f}% of {prompt:,} prompt tokens"


async def _model_change_line(ctx: CommandContext) -> list[str]:
    """Why the model shown is not the configured one: a session keeps its model until /new."""
    upcoming = await ctx.next_model() if ctx.next_model is not None else ctx.session.model
    if upcoming == ctx.session.model:
        return []
    return [f"This conversation keeps {ctx.session.model} until /new; a new one starts on {upcoming}"]


def _override_line(info: SessionInfo) -> str:
    """Which ``overrides:`` entries this session started with (frozen until /new)."""
    frozen = info.chat_overrides or {}
    match = frozen.get("match") or []
    if not match:
        return "Chat overrides: none (the service's settings)"
    parts = [f"summary model {frozen['summary_model']}"] if frozen.get("summary_model") else []
    if frozen.get("budget_tokens"):
        parts.append(f"budget {int(frozen['budget_tokens']):,} tokens")
    tools = frozen.get("tools")
    if isinstance(tools, dict):
        parts.extend(
            f"MCP tools {key} {', '.join(tools[key])}" for key in ("include", "exclude") if tools.get(key)
        )
    extra = f" ({', '.join(parts)})" if parts else ""
    return f"Chat overrides: {', '.join(str(m) for m in match)}{extra}; changes apply after /new"


async def _help(ctx: CommandContext, _: str) -> str:
    entries = dict(HELP)
    if ctx.is_admin:
        entries.update(ADMIN_HELP)
    return "Commands:\n" + "\n".join(f"/{name} — {text}" for name, text in entries.items())


async def _restore(ctx: CommandContext, _: str) -> str:
    try:
        record = await ctx.store.restore_latest_compaction(ctx.session.id)
    except NotFound:
        return "There is no compaction to undo."
    await ctx.store.audit(
        "restore", platform=ctx.session.platform, user_id=None, detail=f"{ctx.session.id} {record.id}"
    )
    return (
        f"Undid the latest compaction ({record.trigger}): "
        f"{record.messages_archived} messages are active again."
    )


async def _tasks(ctx: CommandContext, _: str) -> str:
    if ctx.tasks is None:
        return "Scheduled tasks are turned off here."
    views = await ctx.tasks.tasks_of(ctx.info.key)
    if not views:
        return "No active tasks in this chat."
    return "Tasks in this chat:\n" + "\n".join(task_line(v) for v in views)


async def _cancel(ctx: CommandContext, args: str) -> str:
    if ctx.tasks is None:
        return "Scheduled tasks are turned off here."
    task_id = args.split()[0] if args.split() else ""
    if not task_id:
        return "Which task? Send /cancel ID (/tasks lists them)."
    try:
        task = await ctx.tasks.cancel(ctx.info.key, task_id)
    except TaskRejected:
        return f"There is no active task {task_id[:40]} in this chat; /tasks lists them."
    return f"Cancelled task {task.id} ({task.schedule})."


def _age(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 60:
        return "less than a minute"
    if seconds < 3600:
        return f"{max(1, seconds // 60)} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


_HANDLERS: dict[str, Handler] = {
    "new": _new,
    "compact": _compact,
    "forget": _forget,
    "context": _context,
    "usage": _usage,
    "status": _status,
    "help": _help,
    "restore": _restore,
    "tasks": _tasks,
    "cancel": _cancel,
}
