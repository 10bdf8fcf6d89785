"""Time to the first visible text of a reply: streamed (edited in place) versus sent whole.

The whole service (``Service.build``, SQLite in a temp dir) with the Telegram adapter against the
fake Bot API, and the Anthropic provider against the fake Messages API streaming its answer at a
realistic pace: ``--first`` seconds before the first token, then ``--tps`` tokens a second (~4
characters a token). For each reply length the user's message is pushed and the clock stops at
the first ``sendMessage`` the fake receives (what the user first sees), and at the moment the
full reply is visible. Streaming off is today's behaviour: nothing but "typing" until the end.

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


async def one_reply(
    root: Path, chars: int, streaming: bool, pacing: Pacing, n: int
) -> tuple[float, float, int]:
    """(seconds to first visible text, seconds to the whole reply visible, edits) for one message."""
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
            telegram={"poll_timeout": 1},
            allowed_users=[f"telegram:{USER}"],
            llm={"max_retries": 0},
            delivery={"streaming": streaming},
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
                if first is None and telegram.sent:
                    first = now - began
                if telegram.sent and telegram.sent[-1].plain_text == reply:
                    whole = now - began
            await asyncio.wait_for(service.gateway.wait_idle(), 30)
        finally:
            await service.stop()
    assert first is not None
    return first, whole, len(telegram.edits)


async def main(full: bool, tps: float, first_token: float) -> None:
    lengths = [300, 1200, 3000] if not full else [300, 1200, 3000, 8000]
    repeats = 1 if not full else 3
    pacing = Pacing(chunk_chars=4, delay=1 / tps, first_delay=first_token)
    table = Table(
        title=f"Time to first visible text (Telegram fake; model: {first_token:g} s, then {tps:g} tokens/s)"
    )
    for column in ("reply", "streamed: first text", "streamed: whole reply", "not streamed (today)", "edits"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n = 0
        for chars in lengths:
            streamed: list[tuple[float, float, int]] = []
            whole: list[float] = []
            for _ in range(repeats):
                n += 1
                streamed.append(await one_reply(root, chars, True, pacing, n))
                n += 1
                whole.append((await one_reply(root, chars, False, pacing, n))[1])
            first_med = statistics.median(s[0] for s in streamed)
            done_med = statistics.median(s[1] for s in streamed)
            table.add_row(
                f"{chars:,} chars",
                f"{first_med:.2f} s",
                f"{done_med:.2f} s",
                f"{statistics.median(whole):.2f} s",
                str(max(s[2] for s in streamed)),
            )
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--tps", type=float, default=60.0, help="output tokens per second")
    parser.add_argument("--first", type=float, default=0.6, help="seconds before the first token")
    args = parser.parse_args()
    asyncio.run(main(args.full, args.tps, args.first))
