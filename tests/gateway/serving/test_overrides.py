"""Per-chat personas and models: ``overrides:`` resolved most specific first, frozen per session,
taking effect on ``/new``, shown by ``/status``. Through the whole service on the Telegram fake."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.admin.app import create_app
from gateway.config import ChatOverride, Settings
from gateway.serving.overrides import chat_notice_mode, resolve
from gateway.store.override_ops import AdminOverride
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.gateway.admin_support import AUTH, TOKEN
from tests.gateway.conftest import ChatResponder
from tests.gateway.platforms.telegram_bot.test_telegram_service import ALICE, GROUP, make_settings, serving

BOT = "@hygieia_test_bot"


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def responder() -> ChatResponder:
    return ChatResponder()


@pytest.fixture
async def anthropic(responder: ChatResponder) -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=responder) as fake:
        yield fake


PIRATE = "You are a pirate. Answer like one."
LIBRARIAN = "You are a quiet librarian."


def entries(*items: dict[str, Any]) -> list[ChatOverride]:
    return [ChatOverride(**item) for item in items]


def test_a_thread_entry_beats_the_chat_entry_and_unset_fields_fall_through() -> None:
    found = entries(
        {"platform": "telegram", "chat": "-1", "system_prompt": "chat prompt", "budget_tokens": 50_000},
        {"platform": "telegram", "chat": "-1", "thread": "7", "system_prompt": "thread prompt"},
        {"platform": "discord", "chat": "-1", "model": "claude-haiku-4-5"},
    )
    in_thread = resolve(found, "telegram", "-1", "7", system_prompt="default", model="m")
    assert (in_thread.system_prompt, in_thread.budget_tokens, in_thread.model) == (
        "thread prompt",
        50_000,
        "m",
    )
    assert in_thread.match == ("telegram:-1:thread:7", "telegram:-1")
    whole = resolve(found, "telegram", "-1", "8", system_prompt="default", model="m")
    assert (whole.system_prompt, whole.match) == ("chat prompt", ("telegram:-1",))
    other = resolve(found, "telegram", "-2", None, system_prompt="default", model="m")
    assert (other.system_prompt, other.match, other.frozen()) == ("default", (), None)


def test_an_admin_entry_beats_the_configs_at_the_same_level_but_not_a_more_specific_one() -> None:
    config = entries(
        {"platform": "telegram", "chat": "-1", "system_prompt": "config chat", "budget_tokens": 50_000},
        {"platform": "telegram", "chat": "-1", "thread": "7", "model": "claude-opus-4-8"},
    )
    admin = [AdminOverride("telegram", "-1", system_prompt="admin chat", model="claude-haiku-4-5")]
    whole = resolve(config, "telegram", "-1", None, system_prompt="default", model="m", admin=admin)
    assert (whole.system_prompt, whole.model, whole.budget_tokens) == (
        "admin chat",
        "claude-haiku-4-5",
        50_000,
    )
    assert whole.match == ("admin telegram:-1", "telegram:-1")
    # In the thread the config's thread entry is the most specific: its model wins; the prompt
    # still comes from the admin's chat entry, before the config's.
    thread = resolve(config, "telegram", "-1", "7", system_prompt="default", model="m", admin=admin)
    assert (thread.model, thread.system_prompt) == ("claude-opus-4-8", "admin chat")
    assert thread.match == ("telegram:-1:thread:7", "admin telegram:-1", "telegram:-1")
    mine = [AdminOverride("telegram", "-1", thread="7", model="claude-sonnet-4-6")]
    both = resolve(config, "telegram", "-1", "7", system_prompt="default", model="m", admin=mine)
    assert both.model == "claude-sonnet-4-6" and both.match[0] == "admin telegram:-1:thread:7"


def test_a_numeric_chat_id_in_yaml_names_the_same_chat() -> None:
    [entry] = entries({"platform": "telegram", "chat": -1001234, "thread": 5})
    assert (entry.chat, entry.thread) == ("-1001234", "5")


def test_a_chat_can_have_its_own_compaction_notice() -> None:
    settings = Settings(overrides=[{"platform": "telegram", "chat": "1", "compaction_notice": "always"}])
    assert chat_notice_mode(settings, "telegram", "1", None) == "always"
    assert chat_notice_mode(settings, "telegram", "2", None) is None


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system") or []
    return system if isinstance(system, str) else "".join(b["text"] for b in system)


def with_overrides(
    tmp_path: Path, db_url: str, telegram: FakeTelegram, anthropic: FakeAnthropic, prompt: str
) -> Settings:
    override = {
        "platform": "telegram",
        "chat": str(GROUP),
        "system_prompt": prompt,
        "model": "claude-haiku-4-5",
    }
    return make_settings(
        tmp_path, db_url, telegram, anthropic, overrides=[{**override, "budget_tokens": 60_000}]
    )


async def test_an_override_sets_the_chats_prompt_and_model_and_stays_the_same_across_turns(
    tmp_path: Path,
    db_url: str,
    store: Store,
    telegram: FakeTelegram,
    anthropic: FakeAnthropic,
    responder: ChatResponder,
) -> None:
    async with serving(with_overrides(tmp_path, db_url, telegram, anthropic, PIRATE)):
        telegram.push_message(GROUP, f"{BOT} ahoy", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(1, timeout=10)
        telegram.push_message(GROUP, f"{BOT} again", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(2, timeout=10)
        telegram.push_message(ALICE, "and in my DM?", user_id=ALICE)
        await telegram.wait_for_sent(3, timeout=10)
    group_first, group_second, dm = responder.chat_bodies
    assert [b["model"] for b in responder.chat_bodies] == [
        "claude-haiku-4-5",
        "claude-haiku-4-5",
        "claude-sonnet-4-6",
    ]
    assert system_text(group_first) == PIRATE
    # The cached prefix (tools, then system) is byte-identical from one turn to the next.
    prefix = [
        json.dumps([b.get("tools"), b.get("system")], sort_keys=True) for b in (group_first, group_second)
    ]
    assert prefix[0] == prefix[1]
    assert system_text(dm) != PIRATE


async def test_a_changed_override_applies_after_new_and_status_says_which_applies(
    tmp_path: Path,
    db_url: str,
    store: Store,
    telegram: FakeTelegram,
    anthropic: FakeAnthropic,
    responder: ChatResponder,
) -> None:
    async with serving(with_overrides(tmp_path, db_url, telegram, anthropic, PIRATE)):
        telegram.push_message(GROUP, f"{BOT} ahoy", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(1, timeout=10)
    # The deployer changes the entry and restarts: the running conversation keeps its frozen prompt.
    async with serving(with_overrides(tmp_path, db_url, telegram, anthropic, LIBRARIAN)):
        telegram.push_message(GROUP, f"{BOT} still there?", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(2, timeout=10)
        telegram.push_message(GROUP, "/status", user_id=ALICE, chat_type="supergroup")
        status = (await telegram.wait_for_sent(3, timeout=10))[2].plain_text
        telegram.push_message(GROUP, "/new", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(4, timeout=10)
        telegram.push_message(GROUP, f"{BOT} hello again", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(5, timeout=10)
    prompts = [system_text(b) for b in responder.chat_bodies]
    assert prompts == [PIRATE, PIRATE, LIBRARIAN]
    assert f"Chat overrides: telegram:{GROUP}" in status and "after /new" in status
    assert "(window 200,000 tokens, effective budget 60,000)" in status


async def test_an_admin_set_override_applies_after_new_and_status_names_it(
    tmp_path: Path,
    db_url: str,
    store: Store,
    telegram: FakeTelegram,
    anthropic: FakeAnthropic,
    responder: ChatResponder,
) -> None:
    app = create_app(store, token=TOKEN)
    admin = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://admin.test", headers=AUTH
    )
    async with admin, serving(with_overrides(tmp_path, db_url, telegram, anthropic, PIRATE)):
        telegram.push_message(GROUP, f"{BOT} ahoy", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(1, timeout=10)
        answer = await admin.post(
            "/api/overrides",
            json={
                "platform": "telegram",
                "chat": str(GROUP),
                "system_prompt": LIBRARIAN,
                "model": "claude-sonnet-4-6",
            },
        )
        assert answer.status_code == 200, answer.text
        # The running session keeps what it started with (the cached prefix holds).
        telegram.push_message(GROUP, f"{BOT} still there?", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(2, timeout=10)
        telegram.push_message(GROUP, "/new", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(3, timeout=10)
        telegram.push_message(GROUP, f"{BOT} hello again", user_id=ALICE, chat_type="supergroup")
        await telegram.wait_for_sent(4, timeout=10)
        telegram.push_message(GROUP, "/status", user_id=ALICE, chat_type="supergroup")
        status = (await telegram.wait_for_sent(5, timeout=10))[4].plain_text
    assert [system_text(b) for b in responder.chat_bodies] == [PIRATE, PIRATE, LIBRARIAN]
    assert [b["model"] for b in responder.chat_bodies] == [
        "claude-haiku-4-5",
        "claude-haiku-4-5",
        "claude-sonnet-4-6",
    ]
    # The admin's entry wins where it sets something; the budget still comes from the config's.
    assert f"Chat overrides: admin telegram:{GROUP}, telegram:{GROUP}" in status
    assert "(budget 60,000 tokens); changes apply after /new" in status
