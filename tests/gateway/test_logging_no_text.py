"""What users say is never logged, at any level: a turn served by ``hygieia run`` at DEBUG leaves
neither the message nor the reply in stderr or the log file (ids and sizes only)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.process_env import clean_env

ALICE = 42
SAID = "my locker code is platypus-7781"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=ChatResponder()) as fake:
        yield fake


async def test_a_turn_at_debug_logs_no_message_or_reply_text(
    tmp_path: Path, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    env = clean_env()
    env.update(
        {
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "HYGIEIA_TELEGRAM_BASE_URL": telegram.root,
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": anthropic.base_url,
            "HYGIEIA_ALLOWED_USERS": f"telegram:{ALICE}",
            "HYGIEIA_DATA_DIR": str(tmp_path),
            "HYGIEIA_MODEL": MODEL,
            "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
            "HYGIEIA_LOG_LEVEL": "DEBUG",
            "HYGIEIA_LOG_FORMAT": "json",
            "PYTHONPATH": str(REPO),
        }
    )
    # DEBUG is a lot of output: into a file, so that a full pipe never stalls the child.
    err_path = tmp_path / "stderr.txt"
    with err_path.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "gateway.cli", "run"],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd=tmp_path,
        )
        try:
            telegram.push_message(ALICE, SAID, user_id=ALICE)
            [sent] = await telegram.wait_for_sent(1, timeout=60)
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    stderr = err_path.read_text(errors="replace")
    assert proc.returncode == 0, stderr[-2000:]
    assert sent.plain_text == f"reply: {SAID}"
    logged = stderr + "".join(p.read_text() for p in (tmp_path / "logs").glob("hygieia.log*"))
    assert '"level": "DEBUG"' in logged  # the run did log at DEBUG
    leaks = [line[:300] for line in logged.splitlines() if "platypus" in line]
    assert leaks == []
