"""Hooks named by config in the hook tests (``"tests.agent.engines.hook_funcs:keep_rule"``)."""

from __future__ import annotations

from agent.engines.hooks import PreCompact
from agent.types import CompactionRecord

SEEN: list[CompactionRecord] = []


def keep_rule(event: PreCompact) -> str:
    return "RULE-42: invoices are always sent in EUR."


async def remember(record: CompactionRecord) -> None:
    SEEN.append(record)
