"""Compaction hooks that misbehave the ways a deployer's script does, named by config in the
hook tests (``HYGIEIA_HOOKS__PRE_COMPACT=tests.gateway.misbehaving_hooks:hangs``)."""

from __future__ import annotations

import asyncio
import sys
import time


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
