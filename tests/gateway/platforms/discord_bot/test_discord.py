"""Discord intake: the real discord.py client against the fake Discord, MESSAGE_CREATE -> InboundMessage."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest

from gateway.platforms.base import InboundMessage, OutboundTarget
from tests.fakes.discord import FakeAttachment, FakeDiscord
from tests.gateway.discord_support import DM_CHANNEL, USER, dm, in_guild, running
from tests.gateway.inbox_recorder import Inbox, echo


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_dm_becomes_an_inbound_message_and_the_reply_is_posted_to_the_dm(fake: FakeDiscord) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        payload = dm(fake, "hello there")
        [msg] = await inbox.wait_for(1)
        [sent] = await fake.wait_for_sent(1)
    assert (msg.platform, msg.chat_id, msg.user_id, msg.user_name) == (
        "discord",
        str(DM_CHANNEL),
        str(USER),
        "Ann",
    )
    assert (msg.text, msg.chat_type, msg.addressed, msg.edited) == ("hello there", "dm", True, False)
    assert msg.platform_message_id == payload["id"]
    assert msg.thread_id is None and msg.timestamp.tzinfo is not None
    assert (sent.channel_id, sent.content) == (DM_CHANNEL, "echo: hello there")
    assert sent.message_reference is not None and str(sent.message_reference["message_id"]) == payload["id"]


async def test_guild_message_without_a_mention_is_ambient_and_unanswered(fake: FakeDiscord) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        in_guild(fake, "just chatting")
        [msg] = await inbox.wait_for(1)
    assert (msg.chat_type, msg.chat_id, msg.addressed, msg.text) == (
        "group",
        str(fake.channel_id),
        False,
        "just chatting",
    )
    assert fake.sent == []


async def test_mention_addresses_the_bot_and_is_stripped(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        in_guild(fake, f"{fake.bot_mention}, what time is it?", mentions_bot=True)
        in_guild(fake, f"tell me <@!{fake.bot_id}> a joke", mentions_bot=True)
        first, second = await inbox.wait_for(2)
    assert (first.addressed, first.text) == (True, "what time is it?")
    assert (second.addressed, second.text) == (True, "tell me a joke")


async def test_mention_of_someone_else_does_not_address_the_bot(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        in_guild(fake, "<@777> look at this")
        [msg] = await inbox.wait_for(1)
    assert msg.addressed is False


async def test_reply_to_the_bot_addresses_it(fake: FakeDiscord) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        in_guild(fake, "first", mentions_bot=True)
        [answer] = await fake.wait_for_sent(1)
        in_guild(fake, "and then?", reply_to_bot=True)
        _, msg = await inbox.wait_for(2)
    assert (msg.addressed, msg.text) == (True, "and then?")
    assert msg.reply_to_message_id == str(answer.message_id)


async def test_thread_message_names_the_thread_and_the_reply_goes_to_the_thread(fake: FakeDiscord) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        payload = in_guild(fake, "in a thread", thread=True, mentions_bot=True)
        [msg] = await inbox.wait_for(1)
        [sent] = await fake.wait_for_sent(1)
    thread_id = int(payload["channel_id"])
    assert thread_id != fake.channel_id
    assert (msg.chat_id, msg.thread_id) == (str(fake.channel_id), str(thread_id))
    assert sent.channel_id == thread_id


async def test_own_messages_are_ignored_and_other_bots_arrive_marked_from_bot(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        in_guild(fake, "I said this", author_id=fake.bot_id, author_name="hygieia", author_is_bot=True)
        in_guild(fake, "beep", author_id=999, author_name="otherbot", author_is_bot=True, mentions_bot=True)
        in_guild(fake, "a person")
        bot, person = await inbox.wait_for(2)
        await asyncio.sleep(0.1)
    assert [m.text for m in inbox.messages] == ["beep", "a person"]
    assert (bot.user_id, bot.from_bot, bot.addressed) == ("999", True, True)  # the gateway decides
    assert (person.user_id, person.from_bot) == (str(USER), False)


async def test_a_reply_to_the_bot_naming_someone_else_is_not_addressed(fake: FakeDiscord) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        in_guild(fake, "first", mentions_bot=True)
        await fake.wait_for_sent(1)
        in_guild(fake, "<@4200000000000000777> what do you think?", reply_to_bot=True)
        _, msg = await inbox.wait_for(2)
    assert msg.addressed is False


async def test_ambient_off_drops_unaddressed_group_messages(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(fake, inbox, ambient=False):
        in_guild(fake, "background noise")
        in_guild(fake, "for you", mentions_bot=True)
        await inbox.wait_for(1)
        await asyncio.sleep(0.1)
    assert [m.text for m in inbox.messages] == ["for you"]


async def test_attachments_are_recorded_and_text_files_read(fake: FakeDiscord) -> None:
    files = [
        FakeAttachment("notes.txt", b"line one\nline two", "text/plain; charset=utf-8"),
        FakeAttachment("cat.png", b"\x89PNG....", "image/png"),
        FakeAttachment("blob.bin", b"\x00\x01", None),
    ]
    inbox = Inbox()
    async with running(fake, inbox):
        payload = dm(fake, "see files", attachments=files)
        [msg] = await inbox.wait_for(1)
    text, image, blob = msg.attachments
    urls = [a["url"] for a in payload["attachments"]]
    assert (text.kind, text.file_name, text.mime_type, text.size) == (
        "document",
        "notes.txt",
        "text/plain",
        17,
    )
    assert (text.file_id, text.text) == (urls[0], "line one\nline two")
    assert (image.kind, image.mime_type, image.file_id, image.text) == ("photo", "image/png", urls[1], None)
    assert (blob.kind, blob.size, blob.note) == (
        "document",
        2,
        None,
    )  # read (or refused with a reply) when it joins the conversation


async def test_edited_message_arrives_marked_edited(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        original = dm(fake, "helo")
        await inbox.wait_for(1)
        fake.push_edit(original, "hello")
        _, edited = await inbox.wait_for(2)
    assert (edited.text, edited.edited, edited.platform_message_id) == ("hello", True, original["id"])


async def test_malformed_messages_are_logged_and_intake_goes_on(
    fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = Inbox()
    no_channel = {"id": "1", "content": "where?", "type": 0}  # fails inside discord.py's parser
    no_author = {"id": "2", "channel_id": str(DM_CHANNEL), "content": "who?", "type": 0}  # fails converting
    async with running(fake, inbox) as adapter:
        with caplog.at_level(logging.WARNING, logger="gateway.platforms"):
            fake.dispatch("MESSAGE_CREATE", no_channel)
            fake.dispatch("MESSAGE_CREATE", no_author)
            dm(fake, "still here")
            [msg] = await inbox.wait_for(1)
        await adapter.send_typing(OutboundTarget("discord", msg.chat_id))  # the connection still works
    assert msg.text == "still here"
    assert "malformed MESSAGE_CREATE" in caplog.text
    assert "could not read message 2" in caplog.text
    assert (fake.identify_count, fake.typing) == (1, [DM_CHANNEL])


async def test_messages_reach_a_slow_handler_in_arrival_order(fake: FakeDiscord) -> None:
    inbox = Inbox()

    async def slow(message: InboundMessage) -> None:
        await asyncio.sleep(0.03 if message.text == "1" else 0)

    inbox.before = slow
    async with running(fake, inbox):
        for n in range(1, 6):
            dm(fake, str(n))
        await inbox.wait_for(5)
    assert [m.text for m in inbox.messages] == ["1", "2", "3", "4", "5"]


async def test_failed_intake_is_retried_until_committed(fake: FakeDiscord) -> None:
    inbox = Inbox()
    failures = [RuntimeError("database is locked")]

    async def flaky(message: InboundMessage) -> None:
        if failures:
            raise failures.pop()

    inbox.before = flaky
    async with running(fake, inbox):
        dm(fake, "keep me")
        [msg] = await inbox.wait_for(1, timeout=3.0)
    assert msg.text == "keep me"


async def test_dropped_connection_resumes_and_replays_missed_messages(fake: FakeDiscord) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        dm(fake, "before")
        await inbox.wait_for(1)
        await fake.drop_connections()
        dm(fake, "while away")  # queued by the fake and replayed on RESUME
        await inbox.wait_for(2, timeout=10.0)
    assert [m.text for m in inbox.messages] == ["before", "while away"]
    assert (fake.identify_count, fake.resume_count) == (1, 1)


async def test_heartbeats_are_acknowledged_and_the_session_stays_up() -> None:
    async with FakeDiscord(heartbeat_interval=50) as server, running(server):
        await asyncio.sleep(0.4)
    assert server.heartbeats >= 3
    assert (server.identify_count, server.resume_count) == (1, 0)


@pytest.mark.full
async def test_two_shards_in_one_process_each_receive_their_guilds() -> None:
    # discord.py waits 5 s between the shards' IDENTIFYs, hence behind the "full" mark.
    first, second = 1_300_000_000_000_000_100, (1 << 22) | 1_300_000_000_000_000_100  # shard 0 and shard 1
    inbox = Inbox()
    async with (
        FakeDiscord(guilds={first: [11], second: [12]}) as server,
        running(server, inbox, shard_count=2),
    ):
        in_guild(server, "to shard 0", guild_id=first, channel_id=11, mentions_bot=True)
        in_guild(server, "to shard 1", guild_id=second, channel_id=12, mentions_bot=True)
        dm(server, "a DM")
        await inbox.wait_for(3)
    assert sorted(m.text for m in inbox.messages) == ["a DM", "to shard 0", "to shard 1"]
    assert sorted(p["shard"] for p in server.identify_payloads) == [[0, 2], [1, 2]]


async def test_a_text_file_over_the_limit_is_read_in_part_with_a_note_as_on_telegram(
    fake: FakeDiscord,
) -> None:
    inbox = Inbox()
    async with running(fake, inbox, max_text_file_bytes=40):
        dm(fake, "", attachments=[FakeAttachment("data.csv", b"a,b\n" * 100, "text/csv")])
        [msg] = await inbox.wait_for(1)
    [att] = msg.attachments
    assert att.text == "a,b\n" * 10
    assert att.note == "kept the first 40 of 400 bytes"


async def test_a_bot_of_another_fake_is_refused() -> None:
    async with FakeDiscord() as first, FakeDiscord() as second:
        assert first.token != second.token
        async with aiohttp.ClientSession() as http:
            answer = await http.get(
                f"{second.api_base}/users/@me", headers={"Authorization": f"Bot {first.token}"}
            )
        assert answer.status == 401
