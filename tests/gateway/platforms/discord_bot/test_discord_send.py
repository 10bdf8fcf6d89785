"""Discord lifecycle and sending: the real discord.py client against the fake Discord."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from agent.errors import ConfigError
from gateway.config import DiscordSettings
from gateway.errors import AdapterError, DeliveryRefused
from gateway.platforms.base import OutboundTarget
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from tests.fakes.discord import FakeDiscord
from tests.gateway.discord_support import DM_CHANNEL, dm, make_adapter, running
from tests.gateway.inbox_recorder import Inbox

MESSAGES = "POST /channels/{id}/messages"


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def channel(fake: FakeDiscord) -> OutboundTarget:
    return OutboundTarget("discord", str(fake.channel_id))


async def test_rate_limited_send_is_retried_and_delivered_once(fake: FakeDiscord) -> None:
    async with running(fake) as adapter:
        fake.fail_next(MESSAGES, 429, retry_after=0.2)
        began = time.monotonic()
        ids = await adapter.send(channel(fake), "patience")
        waited = time.monotonic() - began
    assert [s.content for s in fake.sent] == ["patience"]
    assert ids == [str(fake.sent[0].message_id)]
    assert [r.status for r in fake.requests if r.method == "POST"] == [429, 200]
    assert waited >= 0.2


async def test_server_error_is_retried_by_discord_py(fake: FakeDiscord) -> None:
    async with running(fake) as adapter:
        fake.fail_next(MESSAGES, 500)
        await adapter.send(channel(fake), "eventually")
    assert [s.content for s in fake.sent] == ["eventually"]


async def test_an_oversized_text_is_refused_not_split(fake: FakeDiscord) -> None:
    # Delivery splits a reply once (tests/gateway/outbound/test_delivery_split.py); a longer part
    # reaching the adapter is a caller's mistake, refused for good rather than split again.
    async with running(fake) as adapter:
        with pytest.raises(DeliveryRefused, match="over the limit of 2,000"):
            await adapter.send(channel(fake), "x" * 2001)
        await adapter.send(channel(fake), "x" * 2000)
    assert [len(s.content) for s in fake.sent] == [2000]


async def test_replies_never_ping_everyone_or_roles(fake: FakeDiscord) -> None:
    async with running(fake) as adapter:
        await adapter.send(channel(fake), "@everyone look")
    assert fake.sent[0].payload["allowed_mentions"] == {"parse": [], "replied_user": True}


async def test_send_to_an_unknown_channel_is_an_adapter_error(fake: FakeDiscord) -> None:
    async with running(fake) as adapter:
        with pytest.raises(AdapterError, match="unknown channel 12345"):
            await adapter.send(OutboundTarget("discord", "12345"), "anyone?")


async def test_typing_indicator_is_posted_to_the_channel(fake: FakeDiscord) -> None:
    async with running(fake) as adapter:
        dm(fake, "hi")
        await adapter.send_typing(OutboundTarget("discord", str(DM_CHANNEL)))
    assert fake.typing == [DM_CHANNEL]


async def test_send_before_start_is_an_adapter_error(fake: FakeDiscord) -> None:
    adapter = make_adapter(fake)
    with pytest.raises(AdapterError, match="not started"):
        await adapter.send(channel(fake), "too early")


async def test_refused_token_fails_start_with_a_clear_error(fake: FakeDiscord) -> None:
    adapter = make_adapter(fake, token="wrong-token")
    with pytest.raises(AdapterError, match="refused the bot token"):
        await adapter.start(Inbox())
    assert [(r.path, r.status) for r in fake.requests] == [("/users/@me", 401)]
    assert fake.identify_count == 0


async def test_unreachable_gateway_fails_start_with_a_clear_error(fake: FakeDiscord) -> None:
    adapter = DiscordAdapter(
        fake.token,
        api_base=fake.api_base,
        gateway_url=f"ws://127.0.0.1:{fake.port}/no-gateway-here",
        settings=DiscordSettings(),
        ready_timeout=5.0,
    )
    with pytest.raises(
        AdapterError, match=r"could not connect to the gateway at ws://\S+/no-gateway-here: 404"
    ):
        await adapter.start(Inbox())


async def test_endpoints_are_restored_after_stop_and_after_a_failed_start(fake: FakeDiscord) -> None:
    before = (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    async with running(fake):
        assert (fake.api_base, yarl.URL(fake.gateway_url)) == (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    assert before == (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)
    with pytest.raises(AdapterError):
        await make_adapter(fake, token="wrong-token").start(Inbox())
    assert before == (Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY)


async def test_api_base_alone_finds_the_gateway_through_the_api(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(fake, inbox, gateway=False):
        dm(fake, "found you")
        await inbox.wait_for(1)
    assert ("/gateway/bot", 200) in [(r.path, r.status) for r in fake.requests]


async def test_stop_is_idempotent_and_the_adapter_restarts(fake: FakeDiscord) -> None:
    inbox = Inbox()
    adapter = make_adapter(fake)
    await adapter.start(inbox)
    await adapter.stop()
    await adapter.stop()
    await adapter.start(inbox)
    try:
        dm(fake, "again")
        await inbox.wait_for(1)
    finally:
        await adapter.stop()
    assert fake.identify_count == 2


def test_shard_ids_without_a_count_are_refused() -> None:
    with pytest.raises(ConfigError, match="SHARD_COUNT"):
        DiscordAdapter("t", api_base=None, gateway_url=None, settings=DiscordSettings(shard_ids=[0]))
