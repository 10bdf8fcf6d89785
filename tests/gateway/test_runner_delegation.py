"""``hygieia run`` wires ``delegate`` (``delegation:``): a console chat delegates, the sub-agent
answers, the reply reaches the console; with ``delegation.enabled: false`` it is not offered."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.prompts import SUBAGENT_SYSTEM
from gateway.config import Settings
from gateway.runner import run_service
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer, FakeAnthropic, text_reply, tool_use_reply
from tests.gateway.conftest import MODEL


class Responder:
    def __init__(self) -> None:
        self.chat: list[dict[str, Any]] = []
        self.sub: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Answer:
        if SUBAGENT_SYSTEM[:40] in str(body.get("system")):
            self.sub.append(body)
            return text_reply("the sub-agent found 42")
        self.chat.append(body)
        offered = {t["name"] for t in body.get("tools", [])}
        if len(self.chat) == 1 and "delegate" in offered:
            return tool_use_reply("delegate", {"task": "find the number"})
        return text_reply("the answer is 42")


async def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **overrides: object) -> tuple[Responder, str]:
    responder = Responder()
    async with FakeAnthropic(responder=responder) as fake:
        values: dict[str, object] = {
            "data_dir": tmp_path,
            "anthropic_api_key": "test",
            "anthropic_base_url": fake.base_url,
            "model": MODEL,
            "llm": {"max_retries": 0},
            **overrides,
        }
        monkeypatch.setattr(sys, "stdin", io.StringIO("what is the number?\n"))
        out = io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        code = await run_service(Settings(**values), ["console"])  # type: ignore[arg-type]
        monkeypatch.undo()
    assert code == 0
    return responder, out.getvalue()


async def test_hygieia_run_offers_delegate_and_the_sub_agents_answer_reaches_the_chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    responder, out = await _run(tmp_path, monkeypatch, delegation={"max_turns": 3})
    assert out.strip().endswith("the answer is 42")
    assert len(responder.sub) == 1
    assert "delegate" not in {t["name"] for t in responder.sub[0]["tools"]}
    assert "the sub-agent found 42" in str(responder.chat[-1]["messages"])
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'hygieia.db'}")
    await db.connect()
    try:
        store = Store(db)
        (chat,) = [s for s in await store.list_sessions() if s.parent_session_id is None]
        assert len(await store.delegations(chat.id)) == 1
        assert (await store.usage_summary(chat.id)).calls == 3
    finally:
        await db.dispose()


async def test_delegation_disabled_offers_no_delegate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    responder, out = await _run(tmp_path, monkeypatch, delegation={"enabled": False})
    assert out.strip().endswith("the answer is 42")
    assert responder.sub == []
    assert "delegate" not in {t["name"] for t in responder.chat[0]["tools"]}
