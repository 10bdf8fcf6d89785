"""The fake Bot API itself: wire formats and semantics the adapter tests rely on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from telegram import Bot
from telegram.error import BadRequest, InvalidToken

from tests.fakes.telegram import FakeDocument, FakeTelegram


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(fake.token, base_url=fake.bot_base_url, base_file_url=fake.file_base_url) as client:
        yield client


async def test_get_updates_confirms_by_offset(fake: FakeTelegram, bot: Bot) -> None:
    first = fake.push_message(1, "a", user_id=1)["update_id"]
    second = fake.push_message(1, "b", user_id=1)["update_id"]
    assert [u.update_id for u in await bot.get_updates()] == [first, second]
    assert [u.update_id for u in await bot.get_updates(offset=second)] == [second]
    assert fake.acked_offset == second
    assert await bot.get_updates(offset=second + 1, timeout=5) == ()  # long poll capped at ~0.3 s
    assert fake.pending_update_ids == []


async def test_send_and_edit_a_message(fake: FakeTelegram, bot: Bot) -> None:
    sent = await bot.send_message(5, "<b>hi</b>", parse_mode="HTML")
    edited = await bot.edit_message_text("bye", chat_id=5, message_id=sent.message_id)
    assert sent.text == "hi"
    assert not isinstance(edited, bool)
    assert edited.text == "bye"
    with pytest.raises(BadRequest, match="not modified"):
        await bot.edit_message_text("bye", chat_id=5, message_id=sent.message_id)


async def test_invalid_html_and_too_long_text_are_rejected(fake: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match="parse entities"):
        await bot.send_message(5, "<b>open", parse_mode="HTML")
    with pytest.raises(BadRequest, match="too long"):
        await bot.send_message(5, "🙂" * 2049)
    assert fake.sent == []


async def test_a_wrong_token_is_unauthorized(fake: FakeTelegram) -> None:
    other = Bot("1:wrong", base_url=fake.bot_base_url)
    with pytest.raises(InvalidToken):
        await other.initialize()  # getMe
    await other.shutdown()


async def test_json_bodies_are_accepted_and_unknown_methods_are_404(fake: FakeTelegram) -> None:
    async with aiohttp.ClientSession() as session:
        url = f"{fake.bot_base_url}{fake.token}"
        async with session.post(f"{url}/sendMessage", json={"chat_id": 9, "text": "json"}) as resp:
            body = await resp.json()
        async with session.post(f"{url}/noSuchMethod") as missing:
            assert missing.status == 404
    assert body["ok"] is True
    assert body["result"]["text"] == "json"
    assert fake.sent[0].chat_id == 9


async def test_files_download_through_the_file_endpoint(fake: FakeTelegram, bot: Bot) -> None:
    update = fake.push_message(1, None, user_id=1, document=FakeDocument("a.txt", b"abc", "text/plain"))
    file = await bot.get_file(update["message"]["document"]["file_id"])
    assert bytes(await file.download_as_bytearray()) == b"abc"


async def test_a_bot_of_another_fake_is_refused_even_on_a_reused_port() -> None:
    async with FakeTelegram() as first:
        stray, port = first.token, first.port
    async with FakeTelegram(port=port) as second, aiohttp.ClientSession() as http:
        second.push_message(1, "not yours", user_id=1)
        answer = await http.post(f"{second.bot_base_url}{stray}/getUpdates")
        assert answer.status == 401
        assert second.pending_update_ids != []
