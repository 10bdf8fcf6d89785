"""Snip (no call): a person asks to forget the last N exchanges (``/forget [N]``) or a named
range (the admin action). The messages are soft-archived like a compaction (searchable,
``recall``-able, undone by restoring the compaction) and a one-line note takes their place.
It never runs on its own: in the automatic pipeline it does nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

from agent.context_engine import CompressionOutcome
from agent.engines.compressor.boundaries import is_human
from agent.engines.strategies.base import Strategy, StrategyContext
from agent.settings import CompressionSettings
from agent.tokens import estimate_message_tokens, estimate_text_tokens
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage, CompactionPlan, Insertion, text_block

SNIP_NOTE = "[{count} messages (ids {first}-{last}) were set aside at the user's request (/forget)."


class SnipRefused(ValueError):
    """The range cannot be snipped (nothing there, or it splits a tool call from its result)."""


class Snip(Strategy):
    """See the module docstring."""

    name: ClassVar[str] = "snip"

    def runs_on(self, ctx: StrategyContext) -> bool:
        return False

    async def plan(self, ctx: StrategyContext) -> CompressionOutcome | None:
        return None


def build(settings: CompressionSettings) -> Snip:
    return Snip()


def last_exchanges(view: Sequence[ChatMessage], count: int) -> list[ChatMessage]:
    """The messages of the last ``count`` exchanges (from a message a person wrote on)."""
    starts = [i for i, m in enumerate(view) if is_human(m)]
    if not starts or count < 1:
        return []
    return list(view[starts[-min(count, len(starts))] :])


def in_range(view: Sequence[ChatMessage], from_id: int, to_id: int) -> list[ChatMessage]:
    return [m for m in view if m.id is not None and from_id <= m.id <= to_id]


def snip_plan(
    session: AgentSession,
    view: Sequence[ChatMessage],
    chosen: Sequence[ChatMessage],
    *,
    clock_now: datetime | None = None,
) -> CompactionPlan:
    """The plan archiving exactly ``chosen`` (messages of ``view``), a note in their place."""
    started = time.perf_counter()
    ids = [m.id for m in chosen if m.id is not None]
    if not ids:
        raise SnipRefused("there is nothing to forget there")
    gone = set(ids)
    rest = [m for m in view if m.id not in gone]
    if rest and validate_messages(rest) and not validate_messages(view):
        raise SnipRefused("that range splits a tool call from its result")
    compaction_id = uuid.uuid4().hex
    text = (
        SNIP_NOTE.format(count=len(ids), first=min(ids), last=max(ids))
        + f' recall {{"compaction_id": "{compaction_id}"}} reads them.]'
    )
    note = ChatMessage(
        role="user", content=[text_block(text)], kind="summary", created_at=clock_now or datetime.now(UTC)
    )
    system = estimate_text_tokens(session.system_prompt)
    before = system + sum(estimate_message_tokens(m) for m in view)
    after = system + sum(estimate_message_tokens(m) for m in rest) + estimate_message_tokens(note)
    later = [m for m in view if m.id is not None and m.id > max(ids) and m.id not in gone]
    return CompactionPlan(
        trigger="manual",
        archive_ids=tuple(ids),
        insertions=(Insertion(anchor_id=ids[0], message=note),),
        first_kept_id=later[0].id if later else None,
        tokens_before=before,
        tokens_after=min(before, after),
        model="",
        duration_ms=int((time.perf_counter() - started) * 1000),
        status="ok",
        compaction_id=compaction_id,
        strategy="snip",
    )
