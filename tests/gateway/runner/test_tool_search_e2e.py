"""Deferred loading end to end: ``hygieia run`` with ``llm.defer_tools_above_tokens`` and
``llm.tool_search: regex``, a stdio MCP server, the Telegram fake and the fake model. The server's
tools go behind the regex tool search tool, our own stay loaded; the model searches, the reference
loads ``mcp_fake_add``, the call runs and the answer carries its result."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply
from tests.fakes.anthropic_tool_search import tool_search_reply
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL
from tests.gateway.platforms.telegram_bot.test_telegram_service import until
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

ADMIN = 42
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


class SearchingModel:
    """Searches for the adding tool when tools are deferred, then answers with the tool's result."""

    def __init__(self) -> None:
        self.tools: list[list[dict[str, Any]]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.tools.append(body.get("tools", []))
        last = body["messages"][-1]["content"]
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            content = results[0]["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            return text_reply(f"the tool says {text}")
        return tool_search_reply(body, r"^mcp_fake_add\b", call={"a": 20, "b": 22})


async def test_a_deferred_tool_is_found_loaded_and_called_through_hygieia_run(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    config = tmp_path / "hygieia.yaml"
    args = json.dumps(["-m", "tests.fakes.mcp_tools", "stdio"])
    config.write_text(
        "llm:\n  defer_tools_above_tokens: 0\n  tool_search: regex\n"
        f"mcp_servers:\n  fake:\n    command: {sys.executable}\n    args: {args}\n    cwd: {REPO}\n"
    )
    model = SearchingModel()
    async with FakeAnthropic(responder=model) as anthropic:
        env = clean_env()
        env.update(
            {
                "TELEGRAM_BOT_TOKEN": telegram.token,
                "HYGIEIA_TELEGRAM_BASE_URL": telegram.root,
                "ANTHROPIC_API_KEY": "test",
                "ANTHROPIC_BASE_URL": anthropic.base_url,
                "HYGIEIA_ALLOWED_USERS": f"telegram:{ADMIN}",
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
            log = await sigterm_and_wait(proc)
        assert proc.returncode == 0, log
    assert "the tool says 42" in [s.plain_text for s in telegram.sent if s.chat_id == ADMIN]
    first = {t["name"]: t for t in model.tools[0]}
    assert first["tool_search_tool_regex"]["type"] == "tool_search_tool_regex_20251119"
    assert first["mcp_fake_add"]["defer_loading"] is True
    assert not any(t.get("defer_loading") for name, t in first.items() if not name.startswith("mcp_"))
    assert model.tools[1] == model.tools[0]  # the same frozen tools on the call after the search
