"""MCP tools end to end: ``hygieia run`` as a child process with an ``mcp_servers:`` entry of four
lines, the Telegram fake and the fake model. An admin's turn calls the stdio server's tool and
answers with its result; a user no ``allow:`` rule names is not even offered the tool."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_use_reply
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL
from tests.gateway.platforms.telegram_bot.test_telegram_service import until
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

ADMIN = 42
USER = 77
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


class ToolModel:
    """Calls ``mcp_fake_add`` when offered, then answers with what the tool said; says what it was
    offered otherwise."""

    def __init__(self) -> None:
        self.offered: list[list[str]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        names = [t["name"] for t in body.get("tools", [])]
        last = body["messages"][-1]["content"]
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            content = results[0]["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            return text_reply(f"the tool says {text}")
        self.offered.append(names)
        if "mcp_fake_add" in names:
            return tool_use_reply("mcp_fake_add", {"a": 20, "b": 22})
        return text_reply("no tool for that here")


async def test_an_admins_turn_calls_the_tool_and_a_user_not_allowed_is_not_offered_it(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    config = tmp_path / "hygieia.yaml"
    args = json.dumps(["-m", "tests.fakes.mcp_tools", "stdio"])
    config.write_text(
        f"mcp_servers:\n  fake:\n    command: {sys.executable}\n    args: {args}\n    cwd: {REPO}\n"
    )
    model = ToolModel()
    async with FakeAnthropic(responder=model) as anthropic:
        env = clean_env()
        env.update(
            {
                "TELEGRAM_BOT_TOKEN": telegram.token,
                "HYGIEIA_TELEGRAM_BASE_URL": telegram.root,
                "ANTHROPIC_API_KEY": "test",
                "ANTHROPIC_BASE_URL": anthropic.base_url,
                "HYGIEIA_ALLOWED_USERS": f"telegram:{ADMIN},telegram:{USER}",
                "HYGIEIA_ADMIN_USERS": f"telegram:{ADMIN}",
                "HYGIEIA_CONFIG": str(config),
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
            }
        )
        async with hygieia_run(env, tmp_path) as proc:
            telegram.push_message(ADMIN, "what is 20 + 22?", user_id=ADMIN)
            await until(lambda: any("the tool says" in s.plain_text for s in telegram.sent), within=60)
            telegram.push_message(USER, "what is 20 + 22?", user_id=USER)
            await until(lambda: any("no tool for that" in s.plain_text for s in telegram.sent), within=60)
            log = await sigterm_and_wait(proc)
        assert proc.returncode == 0, log
    answers = [s.plain_text for s in telegram.sent if s.chat_id == ADMIN]
    assert "the tool says 42" in answers
    assert "mcp_fake_add" in model.offered[0]
    assert not any(name.startswith("mcp_") for name in model.offered[-1])
