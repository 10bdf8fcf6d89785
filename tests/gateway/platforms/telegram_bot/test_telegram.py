"""Telegram intake: the real PTB Application against the fake Bot API, Updates -> InboundMessage."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.telegram import FakeDocument, FakeTelegram
from tests.gateway.inbox_recorder import Inbox, echo
from tests.gateway.telegram_support import running

GROUP = -100123
BOT = "@hygieia_test_bot"


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def test_dm_message_becomes_an_inbound_message_and_the_reply_arrives(fake: FakeTelegram) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        update = fake.push_message(42, "hello there", user_id=42, username="alice")
        [msg] = await inbox.wait_for(1)
        [sent] = await fake.wait_for_sent(1)
    mid = update["message"]["message_id"]
    assert (msg.platform, msg.chat_id, msg.user_id, msg.user_name) == ("telegram", "42", "42", "alice")
    assert (msg.text, msg.chat_type, msg.addressed, msg.edited) == ("hello there", "dm", True, False)
    assert msg.platform_message_id == f"42:{mid}"
    assert msg.thread_id is None
    assert msg.timestamp.tzinfo is not None
    assert sent.chat_id == 42
    assert sent.plain_text == "echo: hello there"
    assert sent.parse_mode == "HTML"


async def test_unaddressed_group_message_is_delivered_as_ambient(fake: FakeTelegram) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        fake.push_message(GROUP, "just chatting", user_id=7, chat_type="supergroup")
        [msg] = await inbox.wait_for(1)
    assert msg.chat_type == "group"
    assert msg.addressed is False
    assert msg.text == "just chatting"
    assert fake.sent == []


async def test_mention_addresses_the_bot_and_is_stripped(fake: FakeTelegram) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        fake.push_message(GROUP, f"{BOT}, what time is it?", user_id=7, chat_type="group")
        fake.push_message(GROUP, f"tell me {BOT} a joke", user_id=7, chat_type="group")
        first, second = await inbox.wait_for(2)
    assert (first.addressed, first.text) == (True, "what time is it?")
    assert (second.addressed, second.text) == (True, "tell me a joke")


async def test_mention_after_emoji_is_found_by_utf16_offsets(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(GROUP, f"🎉🎉 {BOT} party", user_id=7, chat_type="supergroup")
        [msg] = await inbox.wait_for(1)
    assert (msg.addressed, msg.text) == (True, "🎉🎉 party")


async def test_text_mention_of_the_bot_addresses_it(fake: FakeTelegram) -> None:
    inbox = Inbox()
    entity = {"type": "text_mention", "offset": 0, "length": 7, "user": fake.bot_user}
    async with running(fake, inbox):
        fake.push_message(GROUP, "Hygieia help me", user_id=7, chat_type="supergroup", entities=[entity])
        [msg] = await inbox.wait_for(1)
    assert (msg.addressed, msg.text) == (True, "help me")


async def test_mention_of_someone_else_does_not_address_the_bot(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(GROUP, "@someone_else look", user_id=7, chat_type="supergroup")
        [msg] = await inbox.wait_for(1)
    assert (msg.addressed, msg.text) == (False, "@someone_else look")


async def test_command_for_this_bot_is_addressed_without_the_suffix(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(GROUP, f"/status{BOT} now", user_id=7, chat_type="supergroup")
        fake.push_message(GROUP, "/help", user_id=7, chat_type="supergroup")
        first, second = await inbox.wait_for(2)
    assert (first.addressed, first.text) == (True, "/status now")
    assert (second.addressed, second.text) == (True, "/help")


async def test_command_for_another_bot_is_not_addressed(fake: FakeTelegram) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        fake.push_message(GROUP, "/status@otherbot", user_id=7, chat_type="supergroup")
        [msg] = await inbox.wait_for(1)
    assert (msg.addressed, msg.text) == (False, "/status@otherbot")
    assert fake.sent == []


async def test_reply_to_the_bot_is_addressed(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        update = fake.push_message(GROUP, "and then?", user_id=7, chat_type="supergroup", reply_to_bot=True)
        [msg] = await inbox.wait_for(1)
    replied = update["message"]["reply_to_message"]["message_id"]
    assert msg.addressed is True
    assert msg.reply_to_message_id == f"{GROUP}:{replied}"


async def test_a_reply_to_the_bot_naming_someone_else_is_not_addressed(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(
            GROUP, "@other_bot what do you think?", user_id=7, chat_type="supergroup", reply_to_bot=True
        )
        [msg] = await inbox.wait_for(1)
    assert msg.addressed is False


async def test_another_bots_message_arrives_marked_from_bot(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(
            GROUP, f"{BOT} beep", user_id=555, username="other_bot", chat_type="group", is_bot=True
        )
        fake.push_message(GROUP, f"{BOT} hi", user_id=7, chat_type="group")
        bot, person = await inbox.wait_for(2)
    assert (bot.from_bot, bot.addressed) == (True, True)  # the gateway decides whether it is answered
    assert person.from_bot is False


async def test_forum_topic_sets_thread_id_and_the_reply_goes_to_the_topic(fake: FakeTelegram) -> None:
    inbox = Inbox(echo)
    async with running(fake, inbox):
        fake.push_message(GROUP, f"{BOT} hi topic", user_id=7, chat_type="supergroup", thread_id=77)
        [msg] = await inbox.wait_for(1)
        [sent] = await fake.wait_for_sent(1)
    assert msg.thread_id == "77"
    assert sent.message_thread_id == 77
    assert sent.plain_text == "echo: hi topic"


async def test_edited_message_keeps_its_id_and_is_marked_edited(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        original = fake.push_message(42, "typo", user_id=42)
        mid = original["message"]["message_id"]
        fake.push_message(42, "fixed", user_id=42, edited=True, message_id=mid)
        first, second = await inbox.wait_for(2)
    assert first.platform_message_id == second.platform_message_id == f"42:{mid}"
    assert (first.edited, second.edited, second.text) == (False, True, "fixed")


async def test_channel_post_is_delivered_as_a_channel_message(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(-100999, "news of the day", chat_type="channel")
        [msg] = await inbox.wait_for(1)
    assert (msg.chat_type, msg.chat_id, msg.user_id, msg.addressed) == (
        "channel",
        "-100999",
        "-100999",
        False,
    )


async def test_the_bots_own_message_never_enters(fake: FakeTelegram) -> None:
    inbox = Inbox()
    bot_id = fake.bot_user["id"]
    async with running(fake, inbox):
        fake.push_message(GROUP, "I am the bot", user_id=bot_id, chat_type="supergroup", is_bot=True)
        fake.push_message(GROUP, "after", user_id=7, chat_type="supergroup")
        [msg] = await inbox.wait_for(1)  # updates are processed in order: the bot's came first
    assert msg.text == "after"
    assert len(inbox.messages) == 1


async def test_ambient_off_drops_unaddressed_group_messages(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox, ambient=False):
        fake.push_message(GROUP, "chatter", user_id=7, chat_type="supergroup")
        fake.push_message(GROUP, f"{BOT} question", user_id=7, chat_type="supergroup")
        [msg] = await inbox.wait_for(1)
    assert msg.text == "question"


async def test_text_document_is_downloaded_and_given_as_text(fake: FakeTelegram) -> None:
    inbox = Inbox()
    doc = FakeDocument("notes.md", "# Notes\nremember the milk ✓\n".encode(), "text/markdown")
    async with running(fake, inbox):
        fake.push_message(42, None, user_id=42, document=doc, caption="read this")
        [msg] = await inbox.wait_for(1)
    [att] = msg.attachments
    assert msg.text == "read this"
    assert (att.kind, att.file_name, att.mime_type, att.size) == (
        "document",
        "notes.md",
        "text/markdown",
        len(doc.content),
    )
    assert att.text == "# Notes\nremember the milk ✓\n"
    assert att.note is None
    assert att.file_id is not None
    assert len(fake.calls("getFile")) == 1


async def test_text_document_is_recognized_by_extension_and_capped_with_a_note(fake: FakeTelegram) -> None:
    inbox = Inbox()
    doc = FakeDocument("data.csv", b"a,b\n" * 100, "application/octet-stream")
    async with running(fake, inbox, max_text_file_bytes=40):
        fake.push_message(42, None, user_id=42, document=doc)
        [msg] = await inbox.wait_for(1)
    [att] = msg.attachments
    assert att.text == "a,b\n" * 10
    assert att.note == "kept the first 40 of 400 bytes"


async def test_binary_document_is_described_not_downloaded(fake: FakeTelegram) -> None:
    inbox = Inbox()
    doc = FakeDocument("photo.zip", b"PK\x03\x04" + bytes(100), "application/zip")
    async with running(fake, inbox):
        fake.push_message(42, "here", user_id=42, document=doc)
        [msg] = await inbox.wait_for(1)
    [att] = msg.attachments
    assert (att.kind, att.text, att.note) == (
        "document",
        None,
        None,
    )  # read (or refused with a reply) when it joins the conversation
    assert fake.calls("getFile") == []


async def test_photo_and_voice_are_recorded_as_attachments(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(42, None, user_id=42, photo=b"\xff\xd8" * 500, caption="look")
        fake.push_message(42, None, user_id=42, voice=b"OggS" * 50)
        photo_msg, voice_msg = await inbox.wait_for(2)
    [photo] = photo_msg.attachments
    [voice] = voice_msg.attachments
    assert (photo.kind, photo.size, photo_msg.text) == ("photo", 1000, "look")
    assert (voice.kind, voice.mime_type, voice.size) == ("voice", "audio/ogg", 200)
    assert voice.note is not None and "3 s" in voice.note
    assert voice_msg.text == ""


async def test_ten_thousand_character_message_is_delivered_whole(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(42, "x" * 10_000, user_id=42)
        [msg] = await inbox.wait_for(1)
    assert len(msg.text) == 10_000


async def test_a_lone_surrogate_in_the_text_is_kept_for_cleaning_not_dropped(fake: FakeTelegram) -> None:
    inbox = Inbox()
    async with running(fake, inbox):
        fake.push_message(42, "half an emoji \ud83d here", user_id=42)
        fake.push_message(GROUP, f"{BOT} and \udc4d this", user_id=7, chat_type="supergroup")
        dm, group = await inbox.wait_for(2)
    assert dm.text.replace("\ud83d", "") == "half an emoji  here"
    assert (group.addressed, group.text.replace("\udc4d", "")) == (True, "and  this")
