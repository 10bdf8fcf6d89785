"""Hooks named by config in the hook tests (``"tests.agent.engines.hook_funcs:keep_rule"``)."""

from __future__ import annotations

import asyncio
import sys
import time

from agent.engines.hooks import PreCompact
from agent.types import CompactionRecord

SEEN: list[CompactionRecord] = []


def keep_rule(event: PreCompact) -> str:
    return "RULE-42: invoices are always sent in EUR."


async def remember(record: CompactionRecord) -> None:
    SEEN.append(record)


# Hooks that misbehave the ways a deployer's script does.


async def hangs(event: object) -> None:
    await asyncio.Event().wait()


def hangs_in_a_thread(event: object) -> None:
    time.sleep(3600)


async def cancels_itself(event: object) -> None:
    raise asyncio.CancelledError


def exits(event: object) -> None:
    sys.exit("usage: hook.py [--dry-run]")  # what argparse does with arguments it does not know


async def interrupts(event: object) -> None:
    raise KeyboardInterrupt
