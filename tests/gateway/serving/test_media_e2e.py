"""Pictures and documents reach the model: Telegram photos and documents, Discord attachments,
through the whole service to the fake Messages API (which checks every image block as the API
does); what cannot be read gets a clear reply; compaction leaves a placeholder that recall undoes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gateway.runner import Service
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic, text_reply, tool_use_reply
from tests.fakes.discord import FakeAttachment, FakeDiscord
from tests.fakes.telegram import FakeDocument, FakeTelegram
from tests.gateway.conftest import ChatResponder
from tests.gateway.conftest import make_settings as base_settings
from tests.gateway.discord_support import dm, make_adapter
from tests.gateway.platforms.telegram_bot.test_telegram_service import (
    ALICE,
    BOB,
    make_settings,
    serving,
    until,
)
from tests.gateway.serving.test_media_fuzz import cases
from tests.media_files import pdf, picture, png_bomb
from tests.memory_probe import peak_rss


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=ChatResponder()) as fake:
        yield fake


def blocks_of(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found = []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == kind:
                found.append(block)
            inner = block.get("content")
            if block.get("type") == "tool_result" and isinstance(inner, list):
                found.extend(b for b in inner if b.get("type") == kind)
    return found


async def test_a_telegram_photo_reaches_the_model_as_an_image_block_within_limits(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        telegram.push_message(ALICE, None, user_id=ALICE, photo=picture(3000, 2000), caption="what is this?")
        await telegram.wait_for_sent(1, timeout=20)
    [body] = anthropic.message_requests
    [image] = blocks_of(body, "image")
    assert image["source"]["media_type"] == "image/jpeg"
    assert anthropic.counts["errors"] == 0  # the fake checked type, base64, size and dimensions
    assert "what is this?" in str(body["messages"][-1]["content"][0]["text"])
    [row] = [m for m in await store.messages_after(await _session(store), 0) if m.role == "user"]
    assert row.text.endswith("[image]") and "/9j/" not in row.text  # the text knows of it, without base64


async def test_a_pdf_document_is_a_document_block(
    tmp_path: Path, db_url: str, telegram: FakeTelegram, anthropic: FakeAnthropic, store: Store
) -> None:
    document = FakeDocument("budget.pdf", pdf(["Budget: 42 units"]), "application/pdf")
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        telegram.push_message(ALICE, None, user_id=ALICE, document=document, caption="summarize")
        await telegram.wait_for_sent(1, timeout=20)
    [block] = blocks_of(anthropic.message_requests[0], "document")
    assert block["source"]["media_type"] == "application/pdf" and block["title"] == "budget.pdf"


async def test_an_unreadable_file_gets_a_clear_reply_and_the_message_is_still_answered(
    tmp_path: Path, db_url: str, telegram: FakeTelegram, anthropic: FakeAnthropic, store: Store
) -> None:
    archive = FakeDocument("photos.zip", b"PK\x03\x04" + b"\x00" * 100, "application/zip")
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        telegram.push_message(ALICE, None, user_id=ALICE, document=archive, caption="look at these")
        sent = await telegram.wait_for_sent(2, timeout=20)
    notice = next(s.plain_text for s in sent if "photos.zip" in s.plain_text)
    assert notice.startswith("I couldn't take in everything you sent") and "pictures, PDFs and text" in notice
    assert any(s.plain_text.startswith("reply:") for s in sent)


async def test_an_oversized_picture_is_refused_with_a_reply_without_fetching_it(
    tmp_path: Path, db_url: str, telegram: FakeTelegram, anthropic: FakeAnthropic, store: Store
) -> None:
    huge = FakeDocument("scan.png", picture(50, 50, fmt="PNG"), "image/png", size=30_000_000)
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        telegram.push_message(ALICE, None, user_id=ALICE, document=huge, caption="my scan")
        sent = await telegram.wait_for_sent(2, timeout=20)
    assert any("scan.png: it is too large for me (30.0 MB" in s.plain_text for s in sent)
    assert telegram.calls("getFile") == []
    assert blocks_of(anthropic.message_requests[0], "image") == []


async def test_a_png_bomb_gets_a_one_line_refusal_and_is_never_decoded(
    tmp_path: Path, db_url: str, telegram: FakeTelegram, anthropic: FakeAnthropic, store: Store
) -> None:
    # Sent as a file: a Telegram photo arrives recompressed to 1280 px, a document as it was sent.
    bomb = FakeDocument("bomb.png", png_bomb(13_000, 13_000), "image/png")  # 668 KB -> 676 MB RGBA
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        with peak_rss() as memory:
            telegram.push_message(ALICE, None, user_id=ALICE, document=bomb, caption="look")
            sent = await telegram.wait_for_sent(2, timeout=30)
    [notice] = [s.plain_text for s in sent if s.plain_text.startswith("I couldn't")]
    assert notice == (
        "I couldn't take in everything you sent — bomb.png: "
        "it has too many pixels for me (I read pictures up to 64 megapixels)."
    )
    assert memory.rise < 150_000_000, f"RSS rose {memory.rise / 1e6:.0f} MB"
    assert blocks_of(anthropic.message_requests[0], "image") == []
    assert any(s.plain_text.startswith("reply:") for s in sent)  # the message itself is answered


async def test_pictures_from_two_chats_at_once_are_decoded_one_at_a_time(
    tmp_path: Path, db_url: str, telegram: FakeTelegram, anthropic: FakeAnthropic, store: Store
) -> None:
    # Each decodes whole (a PNG at the 24 Mpx cap: ~200 MB while it is read); two chats at once
    # must not add up, or a few users together take the memory that one cannot.
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        with peak_rss() as memory:
            for user in (ALICE, BOB):
                large = FakeDocument("scan.png", png_bomb(4800, 5000), "image/png")
                telegram.push_message(user, None, user_id=user, document=large, caption="read it")
            await telegram.wait_for_sent(2, timeout=60)
    one = 4800 * 5000 * 9  # about 9 bytes a pixel while decoded and resized (docs/media.md)
    assert memory.rise < one * 1.4, f"RSS rose {memory.rise / 1e6:.0f} MB"
    assert len(blocks_of(anthropic.message_requests[0], "image")) == 1


async def test_pictures_one_after_another_hold_one_pictures_memory_however_busy_the_thread_pool(
    tmp_path: Path, db_url: str, telegram: FakeTelegram, anthropic: FakeAnthropic, store: Store
) -> None:
    # glibc keeps what a thread freed in that thread's arena: decodes that land on different
    # threads of a busy shared pool each keep a picture's worth. A fresh default pool per picture
    # puts every decode that uses it on a thread of its own.
    loop = asyncio.get_running_loop()
    pools: list[ThreadPoolExecutor] = []
    try:
        async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
            with peak_rss() as memory:
                for n in range(3):
                    pools.append(ThreadPoolExecutor(4))
                    loop.set_default_executor(pools[-1])
                    scan = FakeDocument(f"scan{n}.png", png_bomb(4800, 5000), "image/png")
                    telegram.push_message(ALICE, None, user_id=ALICE, document=scan, caption="read it")
                    await telegram.wait_for_sent(n + 1, timeout=60)
    finally:
        loop.set_default_executor(ThreadPoolExecutor())
        for pool in pools:
            pool.shutdown(wait=False)
    one = 4800 * 5000 * 9
    assert memory.rise < one * 1.4, f"RSS rose {memory.rise / 1e6:.0f} MB"


async def test_a_damaged_file_that_crashed_a_decoder_gets_i_could_not_read_this_file(
    tmp_path: Path, db_url: str, telegram: FakeTelegram, anthropic: FakeAnthropic, store: Store
) -> None:
    mutated = list(cases(per_format=80, seed=1913))
    damaged = {
        "anim.gif": mutated[212],
        "report.pdf": mutated[324],
    }  # Pillow: IndexError, pypdf: PdfReadError
    assert [kind for kind, _ in damaged.values()] == ["gif", "pdf"]
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        for name, (kind, data) in damaged.items():
            mime = "image/gif" if kind == "gif" else "application/pdf"
            telegram.push_message(ALICE, None, user_id=ALICE, document=FakeDocument(name, data, mime))
        sent = await telegram.wait_for_sent(4, timeout=30)
    notices = sorted(s.plain_text for s in sent if s.plain_text.startswith("I couldn't"))
    assert notices == [
        "I couldn't take in everything you sent — anim.gif: "
        "I could not read this file (it is damaged, or not a picture).",
        "I couldn't take in everything you sent — report.pdf: "
        "I could not read this file (it is damaged, or not a PDF).",
    ]
    assert len([s for s in sent if s.plain_text.startswith("reply:")]) == 2  # answered, not dead-lettered


async def test_a_discord_attachment_reaches_the_model_as_an_image_block(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    async with FakeDiscord() as discord_fake, FakeAnthropic(responder=ChatResponder()) as llm_fake:
        settings = base_settings(
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=llm_fake.base_url,
            llm={"max_retries": 0},
        )
        service = await Service.build(settings, [make_adapter(discord_fake)], migrate=False)
        await service.start()
        try:
            png = FakeAttachment("diagram.png", picture(2500, 900, fmt="PNG"), "image/png")
            dm(discord_fake, "see the diagram", attachments=[png])
            await discord_fake.wait_for_sent(1, timeout=20)
            await asyncio.wait_for(service.gateway.wait_idle(), 10)
        finally:
            await service.stop()
    [image] = blocks_of(llm_fake.message_requests[0], "image")
    assert image["source"]["media_type"] in ("image/png", "image/jpeg") and llm_fake.counts["errors"] == 0


async def test_after_compaction_the_photo_is_a_placeholder_and_recall_brings_it_back(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    settings = make_settings(
        tmp_path,
        db_url,
        telegram,
        anthropic,
        context_window=8_000,
        compression={"protect_first_n": 1, "protect_last_n": 2},
        # The window is tuned so the recall round stays under the prune point: another tool's
        # definition (delegate) would tip it and prune the recalled picture.
        delegation={"enabled": False},
    )
    async with serving(settings):
        telegram.push_message(ALICE, None, user_id=ALICE, photo=picture(800, 600), caption="my cat")
        await telegram.wait_for_sent(1, timeout=20)
        for n in range(4):
            telegram.push_message(ALICE, f"message {n} about other things: " + "words " * 120, user_id=ALICE)
            await telegram.wait_for_sent(n + 2, timeout=20)
        telegram.push_message(ALICE, "/compact", user_id=ALICE)
        await until(lambda: any(s.plain_text.startswith("Compacted") for s in telegram.sent), within=20)
        photo_id = next(
            m.id for m in await store.messages_after(await _session(store), 0) if "my cat" in m.text
        )
        anthropic.script(
            tool_use_reply("recall", {"from_id": photo_id, "to_id": photo_id}),
            text_reply("It is your cat."),
        )
        telegram.push_message(ALICE, "what was in my first picture?", user_id=ALICE)
        await until(lambda: any(s.plain_text == "It is your cat." for s in telegram.sent), within=20)
    after, with_recall = anthropic.message_requests[-2:]
    assert blocks_of(after, "image") == []  # compacted: no picture in the prompt any more
    placeholder = f'recall {{"from_id": {photo_id}, "to_id": {photo_id}}} shows it again'
    assert placeholder in str(after["messages"])
    [recalled] = blocks_of(with_recall, "image")  # the original, from the archive
    assert recalled["source"]["media_type"] == "image/jpeg" and anthropic.counts["errors"] == 0


async def _session(store: Store) -> str:
    info = await store.current_session(f"telegram:dm:{ALICE}")
    assert info is not None
    return info.id
