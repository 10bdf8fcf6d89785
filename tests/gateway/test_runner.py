"""`hygieia run` end to end: the console adapter from a pipe, the fake Anthropic server, SQLite.

In-process through :func:`gateway.runner.run_service`, and as real processes (``python -m
gateway.cli run``) for the CLI, SIGTERM mid-turn and SIGKILL between the inbox commit and
the reply.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from agent.errors import ConfigError
from agent.types import ChatMessage
from gateway.config import Settings
from gateway.platforms.console.adapter import console_user
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from gateway.platforms.telegram_bot.adapter import TelegramAdapter
from gateway.runner import build_adapters, run_service
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.gateway.conftest import MODEL, ChatResponder, is_summarizer_call
from tests.process_env import clean_env

WINDOW = 8000
FILLER = "we talked about the garden, the roses, the new fence and what to plant next spring "
REPO = Path(__file__).resolve().parents[2]


def _lines(count: int) -> list[str]:
    return [f"message {i}: {FILLER}{FILLER[: 40 + i % 60]}".strip() for i in range(count)]


def _settings(tmp_path: Path, fake: FakeAnthropic, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "data_dir": tmp_path,
        "anthropic_api_key": "test",
        "anthropic_base_url": fake.base_url,
        "model": MODEL,
        "context_window": WINDOW,
        "llm": {"max_retries": 0},
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@asynccontextmanager
async def _open_store(tmp_path: Path) -> AsyncIterator[Store]:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'hygieia.db'}")
    await db.connect()
    try:
        yield Store(db)
    finally:
        await db.dispose()


async def _console_history(store: Store) -> tuple[str, list[ChatMessage]]:
    info = await store.current_session(f"console:{console_user()}")
    assert info is not None
    return info.id, await store.messages_after(info.id, 0)


async def _run_piped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    lines = _lines(count)
    responder = ChatResponder()
    async with FakeAnthropic(context_window=WINDOW, responder=responder) as fake:
        monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
        out = io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        code = await run_service(_settings(tmp_path, fake), ["console"])
        monkeypatch.undo()

        assert code == 0
        replies = [line for line in out.getvalue().splitlines() if line.startswith("reply: ")]
        assert replies == [f"reply: {line[:80]}" for line in lines]  # every message answered, in order
        assert fake.counts["errors"] == 0
        assert all(fake.count_tokens(body) <= WINDOW for body in fake.message_requests)
        assert any(is_summarizer_call(body) for body in fake.message_requests)

    async with _open_store(tmp_path) as store:
        session_id, rows = await _console_history(store)
        said = [m.text.split("] ", 1)[-1] for m in rows if m.role == "user" and m.kind == "message"]
        assert said == lines  # nothing lost: all of them in SQL, archived or active
        compactions = await store.list_compactions(session_id)
        assert compactions and all(c.messages_archived > 0 for c in compactions)
        active, archived = await store.message_counts(session_id)
        assert archived > 0 and active > 0


async def test_200_piped_messages_are_answered_in_order_with_compactions_and_nothing_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _run_piped(tmp_path, monkeypatch, 200)  # about 12 s: small enough to run every time


async def test_a_restart_continues_the_same_console_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeAnthropic(context_window=WINDOW, responder=ChatResponder()) as fake:
        for text in ("first run", "second run"):
            monkeypatch.setattr(sys, "stdin", io.StringIO(text + "\n"))
            monkeypatch.setattr(sys, "stdout", io.StringIO())
            assert await run_service(_settings(tmp_path, fake), ["console"]) == 0
            monkeypatch.undo()
    async with _open_store(tmp_path) as store:
        _, rows = await _console_history(store)
        assert [m.text for m in rows if m.role == "assistant"] == ["reply: first run", "reply: second run"]


async def test_the_start_up_log_says_live_conversations_keep_their_model_until_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeAnthropic(context_window=WINDOW, responder=ChatResponder()) as fake:
        for model in (MODEL, "claude-haiku-4-5"):
            monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n"))
            monkeypatch.setattr(sys, "stdout", io.StringIO())
            with caplog.at_level(logging.INFO, logger="gateway.runner.service"):
                assert await run_service(_settings(tmp_path, fake, model=model), ["console"]) == 0
            monkeypatch.undo()
    said = [r.getMessage() for r in caplog.records if "keep the model" in r.getMessage()]
    assert said == [
        f"model claude-haiku-4-5 is for new conversations; 1 live conversation(s) keep the model they "
        f"started with until /new: {MODEL} (1)"
    ]


# --- real processes ----------------------------------------------------------------------


def _env(tmp_path: Path, fake: FakeAnthropic) -> dict[str, str]:
    env = clean_env()
    env.update(
        {
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": fake.base_url,
            "HYGIEIA_DATA_DIR": str(tmp_path),
            "HYGIEIA_MODEL": MODEL,
            "HYGIEIA_CONTEXT_WINDOW": str(WINDOW),
            "HYGIEIA_LLM__MAX_RETRIES": "0",
            "HYGIEIA_LOG_FORMAT": "json",
            "PYTHONPATH": str(REPO),
        }
    )
    return env


async def _spawn(tmp_path: Path, fake: FakeAnthropic, *argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(tmp_path, fake),
        cwd=tmp_path,
    )


CLI = ("-m", "gateway.cli", "run", "--platform", "console")
# The same service with a one-second inbox lease, so a restart may take over at once.
SHORT_LEASE = (
    "-c",
    "import asyncio, sys\n"
    "from gateway.config import load_settings\n"
    "from gateway.runner import run_service\n"
    "sys.exit(asyncio.run(run_service(load_settings(), ['console'], lease_seconds=1.0)))",
)


async def _until(predicate: object, within: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():  # type: ignore[operator]
        if loop.time() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.05)


async def test_hygieia_run_reads_a_pipe_answers_every_line_and_exits_0(tmp_path: Path) -> None:
    async with FakeAnthropic(context_window=WINDOW, responder=ChatResponder()) as fake:
        proc = await _spawn(tmp_path, fake, *CLI)
        stdout, stderr = await asyncio.wait_for(proc.communicate(b"hello\n\n/status\nbye\n"), 120)

    assert proc.returncode == 0, stderr.decode()
    out = stdout.decode().splitlines()
    assert out[0] == "reply: hello"
    assert any(line.startswith("Model: ") for line in out)
    assert out[-1] == "reply: bye"
    for line in stderr.decode().splitlines():  # structured logs: one JSON object per line, no key
        if line.startswith("{"):
            assert "level" in json.loads(line)
    assert "test" not in [word.strip('",') for word in stderr.decode().split()]


async def test_sigterm_mid_turn_exits_0_and_loses_nothing(tmp_path: Path) -> None:
    responder = ChatResponder(chat_delay=1.5)
    async with FakeAnthropic(context_window=WINDOW, responder=responder) as fake:
        proc = await _spawn(tmp_path, fake, *CLI)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"a question that takes a while\n")
        await proc.stdin.drain()
        await _until(lambda: responder.chat_bodies)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)

    assert proc.returncode == 0, stderr.decode()
    assert "reply: a question that takes a while" in stdout.decode()  # the turn finished within the grace
    async with _open_store(tmp_path) as store:
        _, rows = await _console_history(store)
        assert [m.role for m in rows] == ["user", "assistant"]


async def test_a_process_killed_between_inbox_commit_and_reply_answers_exactly_once_after_restart(
    tmp_path: Path,
) -> None:
    responder = ChatResponder(chat_delay=60)
    async with FakeAnthropic(context_window=WINDOW, responder=responder) as fake:
        proc = await _spawn(tmp_path, fake, *SHORT_LEASE)
        assert proc.stdin is not None
        proc.stdin.write(b"remember the milk\n")
        await proc.stdin.drain()
        await _until(lambda: responder.chat_bodies)  # committed, stored, and waiting on the model
        proc.kill()
        await proc.wait()
        assert proc.returncode == -signal.SIGKILL

        responder.chat_delay = 0
        await asyncio.sleep(1.5)  # the dead worker's lease runs out
        restarted = await _spawn(tmp_path, fake, *CLI)
        stdout, stderr = await asyncio.wait_for(restarted.communicate(b""), 120)

    assert restarted.returncode == 0, stderr.decode()
    assert stdout.decode().splitlines().count("reply: remember the milk") == 1
    async with _open_store(tmp_path) as store:
        _, rows = await _console_history(store)
        assert [(m.role, m.text.split("] ", 1)[-1]) for m in rows] == [
            ("user", "remember the milk"),
            ("assistant", "reply: remember the milk"),
        ]
        record = await store.outbox_for_inbox(1)
        assert record is not None and record.status == "sent"
        assert (await store.inbox_get(1)).status == "done"


def test_every_platform_with_a_token_is_started_and_the_console_otherwise() -> None:
    assert [a.name for a in build_adapters(Settings(), None)] == ["console"]
    both = Settings(telegram_bot_token="123:" + "a" * 35, discord_bot_token="d.t.x")
    adapters = build_adapters(both, None)
    assert [type(a) for a in adapters] == [TelegramAdapter, DiscordAdapter]


@pytest.mark.parametrize("platform", ["telegram", "discord", "irc"])
def test_asking_for_a_platform_that_cannot_start_is_a_config_error(platform: str) -> None:
    with pytest.raises(ConfigError):
        build_adapters(Settings(), [platform])
