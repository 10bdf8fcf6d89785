"""`hygieia run` with compaction hooks that hang, cancel themselves or exit: each is a failed hook,
logged once by name and skipped; every line of the scripted chat is answered and the conversation
is still compacted."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from gateway.platforms.console.adapter import console_user
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.gateway.conftest import MODEL, ChatResponder
from tests.process_env import clean_env

WINDOW = 8000
LINES = 30
FILLER = "the greenhouse, the tomatoes, the watering plan and the fence on the north side; "
REPO = Path(__file__).resolve().parents[2]
HOOKS = "tests.agent.engines.hook_funcs"


def lines() -> list[str]:
    return [f"line {i}: {FILLER * 7}".strip() for i in range(LINES)]


async def run_chat(tmp_path: Path, kind: str, hook: str) -> tuple[int, list[str], list[dict[str, object]]]:
    """The scripted chat through `hygieia run`: exit code, replies, the JSON log records."""
    config = tmp_path / "hygieia.yaml"
    config.write_text(f"hooks:\n  timeout_seconds: 1\n  {kind}: {HOOKS}:{hook}\n")
    async with FakeAnthropic(context_window=WINDOW, responder=ChatResponder()) as fake:
        env = clean_env()
        env.update(
            {
                "ANTHROPIC_API_KEY": "e2e-key-of-the-hook-tests",
                "ANTHROPIC_BASE_URL": fake.base_url,
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "HYGIEIA_CONTEXT_WINDOW": str(WINDOW),
                "HYGIEIA_LLM__MAX_RETRIES": "0",
                "HYGIEIA_LOG_FORMAT": "json",
                "HYGIEIA_CONFIG": str(config),
                "PYTHONPATH": str(REPO),
            }
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.cli",
            "run",
            "--platform",
            "console",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=tmp_path,
        )
        script = "\n".join(lines()) + "\n"
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(script.encode()), 240)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    replies = [line for line in stdout.decode().splitlines() if line.startswith("reply: ")]
    records = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    assert all(line.startswith("{") for line in stderr.decode().splitlines() if line.strip()), stderr.decode()
    return proc.returncode or 0, replies, records


async def compactions_made(tmp_path: Path) -> int:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'hygieia.db'}")
    await db.connect()
    try:
        store = Store(db)
        info = await store.current_session(f"console:{console_user()}")
        assert info is not None
        return sum(1 for c in await store.list_compactions(info.id) if c.messages_archived > 0)
    finally:
        await db.dispose()


CASES = [
    *[
        (kind, hook)
        for kind in ("pre_compact", "post_compact")
        for hook in ("hangs", "cancels_itself", "exits")
    ],
    ("pre_compact", "hangs_in_a_thread"),
    ("post_compact", "interrupts"),
]


@pytest.mark.parametrize(("kind", "hook"), CASES, ids=[f"{hook}-{kind}" for kind, hook in CASES])
async def test_a_misbehaving_hook_is_skipped_and_every_line_is_answered(
    tmp_path: Path, kind: str, hook: str
) -> None:
    code, replies, records = await run_chat(tmp_path, kind, hook)
    assert code == 0
    assert replies == [f"reply: {line[:80]}" for line in lines()]
    made = await compactions_made(tmp_path)
    assert made >= 1
    named = [r for r in records if f"{HOOKS}:{hook}" in str(r.get("msg", ""))]
    # One line per call of the hook: pre_compact runs before each summary, post_compact after
    # each stored compaction.
    assert len(named) == made, [r for r in records if "hook" in str(r)]
    assert all(r["level"] == "ERROR" and f"{kind} hook" in str(r["msg"]) for r in named)
