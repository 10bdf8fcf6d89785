"""Time to the first visible text of a reply in a Telegram DM: a draft, edits, or sent whole.

The whole service (``Service.build``, SQLite in a temp dir) with the Telegram adapter against the
fake Bot API, and the Anthropic provider against the fake Messages API streaming its answer at a
realistic pace: ``--first`` seconds before the first token, then ``--tps`` tokens a second (~4
characters a token). For each reply length the user's message is pushed and the clock stops at
the first ``sendMessageDraft`` or ``sendMessage`` the fake accepts (what the user first sees), and
at the moment the full reply is visible as a message. Three ways: drafts (the default in private
chats: a preview, then one message), edits (``telegram.drafts: false``: a message edited about once
a second) and streaming off (nothing but "typing" until the end).

    python bench/first_text.py [--full] [--tps 60] [--first 0.6]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gateway.config import Settings
from gateway.runner import Service, build_adapters
from gateway.store.migrate import upgrade_to_head

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fake servers live in tests/fakes
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.anthropic_sse import Pacing
from tests.fakes.telegram import FakeTelegram

USER = 42
SENTENCE = "This is one sentence of a considered answer, about as long as most. "


MODES = ("drafts", "edits", "whole")


async def one_reply(root: Path, chars: int, mode: str, pacing: Pacing, n: int) -> tuple[float, float, int]:
    """(seconds to first visible text, seconds to the whole reply visible, drafts + edits) for one
    message, shown the ``mode`` way."""
    reply = (SENTENCE * (chars // len(SENTENCE) + 1))[:chars].strip()
    async with FakeTelegram() as telegram, FakeAnthropic() as anthropic:
        anthropic.pacing = pacing
        anthropic.script(text_reply(reply))
        data = root / f"run-{n}"
        settings = Settings(
            data_dir=data,
            anthropic_api_key="bench",
            anthropic_base_url=anthropic.base_url,
            telegram_bot_token=telegram.token,
            telegram_base_url=telegram.root,
            telegram={"poll_timeout": 1, "drafts": mode == "drafts"},
            allowed_users=[f"telegram:{USER}"],
            llm={"max_retries": 0},
            delivery={"streaming": mode != "whole"},
        )  # type: ignore[call-arg]
        data.mkdir(parents=True)
        await upgrade_to_head(settings.resolved_database_url)
        service = await Service.build(settings, build_adapters(settings, ["telegram"]), migrate=False)
        await service.start()
        try:
            began = time.perf_counter()
            telegram.push_message(USER, "a question", user_id=USER)
            first = whole = None
            while whole is None:
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                if first is None and (telegram.sent or telegram.drafts):
                    first = now - began
                if telegram.sent and telegram.sent[-1].plain_text == reply:
                    whole = now - began
            await asyncio.wait_for(service.gateway.wait_idle(), 30)
        finally:
            await service.stop()
    assert first is not None
    return first, whole, len(telegram.edits) + len(telegram.drafts)


async def main(full: bool, tps: float, first_token: float) -> None:
    lengths = [300, 1200, 3000] if not full else [300, 1200, 3000, 8000]
    repeats = 1 if not full else 3
    pacing = Pacing(chunk_chars=4, delay=1 / tps, first_delay=first_token)
    table = Table(
        title=f"Time to first visible text in a DM (Telegram fake; model: {first_token:g} s, "
        f"then {tps:g} tokens/s)"
    )
    columns = ("reply", "drafts: first text", "drafts: whole", "edits: first text", "edits: whole")
    for column in (*columns, "not streamed", "drafts / edits sent"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n = 0
        for chars in lengths:
            runs: dict[str, list[tuple[float, float, int]]] = {mode: [] for mode in MODES}
            for _ in range(repeats):
                for mode in MODES:
                    n += 1
                    runs[mode].append(await one_reply(root, chars, mode, pacing, n))

            def med(mode: str, i: int, runs: dict[str, list[tuple[float, float, int]]] = runs) -> str:
                return f"{statistics.median(r[i] for r in runs[mode]):.2f} s"

            table.add_row(
                f"{chars:,} chars",
                med("drafts", 0),
                med("drafts", 1),
                med("edits", 0),
                med("edits", 1),
                med("whole", 1),
                f"{max(r[2] for r in runs['drafts'])} / {max(r[2] for r in runs['edits'])}",
            )
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--tps", type=float, default=60.0, help="output tokens per second")
    parser.add_argument("--first", type=float, default=0.6, help="seconds before the first token")
    args = parser.parse_args()
    asyncio.run(main(args.full, args.tps, args.first))
