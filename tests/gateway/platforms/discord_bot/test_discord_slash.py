"""Discord slash commands end to end: registration, then each command through the interaction flow
(INTERACTION_CREATE -> callback within 3 s, or deferred and edited) on the runner's own wiring."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.errors import NotFound
from gateway.platforms.base import OutboundTarget
from gateway.platforms.discord_bot import interactions as slash
from gateway.runner import Service
from gateway.serving.commands import command_specs
from gateway.store.records import OutboxRecord
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer, FakeAnthropic
from tests.fakes.discord import FakeDiscord
from tests.fakes.discord_interactions import RESPONSE_DEADLINE, FakeInteraction
from tests.gateway.conftest import ChatResponder, is_summarizer_call, make_settings
from tests.gateway.discord_support import DM_CHANNEL, USER, USER_NAME, dm, make_adapter, running
from tests.gateway.platforms.telegram_bot.test_telegram_service import until

PRIVATE = {"context", "usage", "status", "tasks", "help"}


class SlowSummaries(ChatResponder):
    """Summaries take longer than Discord's 3-second window."""

    summary_delay: float = 0.0

    async def __call__(self, body: dict[str, Any]) -> Answer:
        if is_summarizer_call(body) and self.summary_delay:
            await asyncio.sleep(self.summary_delay)
        return await super().__call__(body)


@dataclass
class Stack:
    discord: FakeDiscord
    service: Service
    responder: SlowSummaries

    def invoke(self, name: str, *, guild: bool = True, **options: str) -> FakeInteraction:
        channel = self.discord.channel_id if guild else DM_CHANNEL
        return self.discord.slash.invoke(
            name,
            user_id=USER,
            user_name=USER_NAME,
            channel_id=channel,
            guild_id=self.discord.guild_id if guild else None,
            options=options,
        )

    async def settle(self) -> None:
        await asyncio.wait_for(self.service.gateway.wait_idle(), 20)
        await self.service.delivery.flush()


@asynccontextmanager
async def stack(
    db_url: str, tmp_path: Path, *, window: int = 200_000, **discord: Any
) -> AsyncIterator[Stack]:
    responder = SlowSummaries()
    async with (
        FakeDiscord() as discord_fake,
        FakeAnthropic(responder=responder, context_window=window) as llm_fake,
    ):
        settings = make_settings(
            context_window=window,
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=llm_fake.base_url,
            llm={"max_retries": 0},
            compression={"protect_first_n": 1, "protect_last_n": 2},
        )
        adapter = make_adapter(discord_fake, commands=command_specs(), **discord)
        service = await Service.build(settings, [adapter], migrate=False)
        await service.start()
        try:
            yield Stack(discord_fake, service, responder)
        finally:
            await service.stop()


async def outbox_rows(store: Store) -> list[OutboxRecord]:
    rows: list[OutboxRecord] = []
    for outbox_id in range(1, 100):
        try:
            rows.append(await store.outbox_get(outbox_id))
        except NotFound:
            break
    return rows


async def test_commands_are_registered_globally_once_and_a_restart_rewrites_nothing() -> None:
    async with FakeDiscord() as fake:
        async with running(fake, commands=command_specs()):
            pass
        async with running(fake, commands=command_specs()):
            pass
    assert fake.slash.command_writes == [None]
    names = [c["name"] for c in fake.slash.commands[None]]
    assert names == [
        "new",
        "compact",
        "forget",
        "context",
        "usage",
        "status",
        "stop",
        "tasks",
        "cancel",
        "help",
    ]
    options = {
        c["name"]: [(o["name"], o["required"]) for o in c["options"]] for c in fake.slash.commands[None]
    }
    assert options["compact"] == [("focus", False)] and options["cancel"] == [("id", True)]


async def test_a_changed_command_list_is_written_again() -> None:
    async with FakeDiscord() as fake:
        async with running(fake, commands=command_specs()[:3]):
            pass
        async with running(fake, commands=command_specs()):
            pass
    assert fake.slash.command_writes == [None, None]
    assert len(fake.slash.commands[None]) == len(command_specs())


async def test_development_guilds_get_the_commands_instead_of_the_global_scope() -> None:
    async with (
        FakeDiscord() as fake,
        running(fake, commands=command_specs(), command_guild_ids=[fake.guild_id]),
    ):
        pass
    assert fake.slash.command_writes == [fake.guild_id]
    assert None not in fake.slash.commands


@pytest.mark.parametrize("name", ["new", "context", "usage", "status", "stop", "tasks", "help"])
async def test_each_command_is_answered_through_its_interaction_within_the_window(
    name: str, db_url: str, tmp_path: Path, store: Store
) -> None:
    async with stack(db_url, tmp_path) as s:
        interaction = s.invoke(name)
        await s.discord.slash.wait_until(interaction)
        await s.settle()
    [(status, after, kind)] = interaction.callbacks
    assert (status, kind) == (200, 4) and after < RESPONSE_DEADLINE
    assert interaction.ephemeral is (name in PRIVATE)
    assert s.discord.sent == []  # nothing posted to the channel besides the interaction's answer
    [row] = await outbox_rows(store)  # the answer is recorded like any reply
    assert row.status == "sent" and row.text == interaction.texts[0]
    assert row.delivered_ids == [interaction.original["id"]] if interaction.original else False


async def test_cancel_takes_its_id_option_through_the_same_command_code(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    async with stack(db_url, tmp_path) as s:
        interaction = s.invoke("cancel", id="no-such-task")
        await s.discord.slash.wait_until(interaction)
    [(status, _, kind)] = interaction.callbacks
    assert (status, kind) == (200, 4) and not interaction.ephemeral
    assert "no-such-task" in interaction.texts[0]


async def test_context_is_drawn_as_the_text_chart(db_url: str, tmp_path: Path, store: Store) -> None:
    async with stack(db_url, tmp_path) as s:
        interaction = s.invoke("context")
        await s.discord.slash.wait_until(interaction)
    assert interaction.texts[0].startswith("```\nContext: ")


async def test_slow_compact_is_deferred_then_its_response_edited(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    async with stack(db_url, tmp_path, window=16_000) as s:
        for n in range(6):
            dm(s.discord, f"message number {n}: " + "the project plan and the budget " * 30)
            await s.discord.wait_for_sent(n + 1, timeout=20)
        await s.settle()
        s.responder.summary_delay = RESPONSE_DEADLINE + 0.5
        interaction = s.invoke("compact", guild=False, focus="the numbers")
        await s.discord.slash.wait_until(interaction, timeout=20)
    [(status, after, kind)] = interaction.callbacks
    assert (status, kind) == (200, 5) and after < 1.0  # acknowledged at once: "thinking..."
    assert interaction.edits == 1
    assert interaction.texts[0].startswith("Compacted ") and "the numbers" in interaction.texts[0]


async def test_a_command_waiting_behind_a_running_turn_is_deferred_and_answered_later(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    async with stack(db_url, tmp_path, interaction_defer_seconds=0.5) as s:
        s.responder.chat_delay = 2.0
        dm(s.discord, "think hard")
        await asyncio.sleep(0.3)
        interaction = s.invoke("status", guild=False)
        await s.discord.slash.wait_until(interaction, timeout=20)
        await s.discord.wait_for_sent(1, timeout=20)
    [(status, after, kind)] = interaction.callbacks
    assert (status, kind) == (200, 5) and after < RESPONSE_DEADLINE
    assert interaction.texts[0].startswith("Model: ")


async def test_text_commands_still_work_next_to_slash_commands(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    async with stack(db_url, tmp_path) as s:
        dm(s.discord, "/help")
        [sent] = await s.discord.wait_for_sent(1, timeout=20)
    assert sent.content.startswith("Commands:")


async def test_an_answer_for_an_interaction_no_longer_held_goes_to_the_channel() -> None:
    async with FakeDiscord() as fake, running(fake, commands=command_specs()) as adapter:
        target = OutboundTarget("discord", str(fake.channel_id), None, "interaction:123")
        await adapter.send(target, "answer after a restart")
    [sent] = fake.sent
    assert sent.content == "answer after a restart" and sent.message_reference is None


async def test_the_fake_refuses_a_first_response_after_three_seconds_and_a_token_after_15_minutes() -> None:
    async with FakeDiscord() as fake, running(fake, commands=command_specs()):
        interaction = fake.slash.invoke("help", user_id=USER, user_name=USER_NAME, channel_id=DM_CHANNEL)
        fake.slash.advance(RESPONSE_DEADLINE + 0.1)
        await asyncio.sleep(0.5)
        async with aiohttp.ClientSession() as http:
            late = await http.post(
                f"{fake.api_base}/interactions/{interaction.id}/{interaction.token}/callback",
                json={"type": 4, "data": {"content": "late"}},
            )
            fake.slash.advance(15 * 60)
            expired = await http.patch(
                f"{fake.api_base}/webhooks/{fake.bot_id}/{interaction.token}/messages/@original",
                json={"content": "too late"},
            )
            late_body, expired_body = await late.json(), await expired.json()
    assert (late.status, late_body["code"]) == (404, 10062)
    assert (expired.status, expired_body["code"]) == (401, 50027)


async def test_a_private_answer_never_reaches_the_channel_after_a_restart(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    """A restart loses the interaction (its token lives in memory): the answer to a private
    command (ephemeral in a guild) must not then be posted where the whole channel reads it."""
    responder = SlowSummaries(chat_delay=2.0)
    async with (
        FakeDiscord() as discord_fake,
        FakeAnthropic(responder=responder) as llm_fake,
    ):
        settings = make_settings(
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=llm_fake.base_url,
            llm={"max_retries": 0},
            sessions={"turn_grace_seconds": 0.1},
        )

        def adapter() -> Any:
            return make_adapter(discord_fake, commands=command_specs(), interaction_defer_seconds=0.3)

        first = await Service.build(settings, [adapter()], migrate=False)
        await first.start()
        try:
            discord_fake.push_message(
                discord_fake.channel_id,
                "think hard about the budget",
                author_id=USER,
                author_name=USER_NAME,
                guild_id=discord_fake.guild_id,
                mentions_bot=True,
            )
            await until(lambda: bool(responder.chat_bodies))  # a turn runs: the command waits
            interaction = discord_fake.slash.invoke(
                "usage",
                user_id=USER,
                user_name=USER_NAME,
                channel_id=discord_fake.channel_id,
                guild_id=discord_fake.guild_id,
            )
            await until(lambda: bool(interaction.callbacks))  # acknowledged: "thinking..."
            await asyncio.sleep(0.3)  # handed to the gateway's inbox
        finally:
            await first.stop()
        responder.chat_delay = 0.0
        second = await Service.build(settings, [adapter()], migrate=False)
        await second.start()
        try:
            await asyncio.wait_for(second.gateway.wait_idle(), 20)
            # The mention's reply comes from the turn served again or, when the first run finished
            # it while stopping (a loaded machine), from the outbox once its send retry is due
            # (the adapter had stopped) and the next delivery poll (10 s) comes: wait for it
            # instead of one delivery round.
            await until(
                lambda: "reply: think hard about the budget" in [m.content for m in discord_fake.sent],
                within=30,
            )
        finally:
            await second.stop()

    assert interaction.ephemeral and interaction.texts == []
    posted = [m.content for m in discord_fake.sent]
    assert posted.count(slash.LOST_PRIVATE_ANSWER) == 1
    assert [p for p in posted if p != slash.LOST_PRIVATE_ANSWER] == ["reply: think hard about the budget"]
