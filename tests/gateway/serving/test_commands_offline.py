"""/context and /compact on the offline provider (as ``hygieia run`` without a key): the numbers
they show agree with each other and claim no count the API never made."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

from agent.offline import OfflineProvider
from gateway.config import Settings
from gateway.platforms.console.adapter import ConsoleAdapter
from gateway.runner import Service
from gateway.store.repository import Store

CHAT = [f"message {i}: the garden, the budget for the shed and the roses to prune" for i in range(80)]
TOTAL = re.compile(r"^Context: ([\d,]+) tokens", re.MULTILINE)
SYSTEM = re.compile(r"^system\s+[█░]+\s+([\d,]+)", re.MULTILINE)
COMPACTED = re.compile(r"\(([\d,]+) -> ([\d,]+) tokens\)")


async def offline_run(tmp_path: Path, db_url: str, lines: list[str]) -> str:
    """What the console prints for ``lines`` played as a scripted user, offline."""
    out = io.StringIO()
    console = ConsoleAdapter(
        user="alice", stdin=io.StringIO("\n".join(lines) + "\n"), stdout=out, interactive=False
    )
    settings = Settings(
        data_dir=tmp_path,
        database_url=db_url,
        allow_all_users=True,
        compression={"budget_tokens": 20_000},  # small, so that /compact has a middle to archive
        scheduler={"enabled": False},
    )
    service = await Service.build(settings, [console], provider=OfflineProvider(), migrate=False)
    await service.start()
    try:
        await asyncio.wait_for(console.finished.wait(), 120)
    finally:
        await service.stop()
    return out.getvalue()


def numbers(pattern: re.Pattern[str], text: str) -> list[int]:
    return [int(n.replace(",", "")) for n in pattern.findall(text)]


async def test_compact_reports_the_sizes_context_shows_before_and_after(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    text = await offline_run(tmp_path, db_url, [*CHAT, "/context", "/compact", "/context"])

    before, after = numbers(TOTAL, text)
    [(reported_before, reported_after)] = COMPACTED.findall(text)
    assert (int(reported_before.replace(",", "")), int(reported_after.replace(",", ""))) == (before, after)
    assert after < before


async def test_offline_context_keeps_its_parts_and_claims_no_api_count(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    text = await offline_run(tmp_path, db_url, ["/context", *CHAT[:10], "/context"])

    first, later = numbers(SYSTEM, text)
    assert first == later  # the made-up usage taught the estimates nothing
    assert "counted by the API" not in text
