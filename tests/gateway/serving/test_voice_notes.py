"""Voice notes through the whole service: Telegram voice and Discord audio are transcribed by the
configured backend (the fake OpenAI-compatible server, or a local program), join the conversation
marked "(voice, transcribed)" with the audio's reference kept; off, over a cap, or the backend down:
one reply saying so, and the message is still in the conversation."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway.config import Settings
from gateway.runner import Service, build_adapters
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.discord import FakeAttachment, FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.fakes.transcription import FakeTranscription, RawAnswer, deep_json
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.discord_support import DM_CHANNEL, USER, dm, make_adapter

ALICE = 42
KEY = "sk-test-transcription"
AUDIO = b"OggS\x00\x02fake-opus-voice-note-bytes" * 10
TG_KEY = f"telegram:dm:{ALICE}"
DC_KEY = f"discord:dm:{DM_CHANNEL}"


@asynccontextmanager
async def service(
    tmp_path: Path, db_url: str, responder: ChatResponder, *, transcription: dict[str, Any], **values: Any
) -> AsyncIterator[tuple[FakeTelegram, FakeDiscord]]:
    async with (
        FakeTelegram() as telegram,
        FakeDiscord() as discord,
        FakeAnthropic(responder=responder) as anthropic,
    ):
        settings = Settings(
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=anthropic.base_url,
            model=MODEL,
            llm={"max_retries": 0},
            delivery={"streaming": False},
            sessions={"turn_grace_seconds": 0.2},
            telegram_bot_token=telegram.token,
            telegram_base_url=telegram.root,
            telegram={"poll_timeout": 1},
            discord_bot_token=discord.token,
            discord_api_base=discord.api_base,
            discord_gateway_url=discord.gateway_url,
            allowed_users=[f"telegram:{ALICE}", f"discord:{USER}"],
            media={"transcription": transcription},
            **values,
        )
        adapters = [*build_adapters(settings, ["telegram"]), make_adapter(discord, slash_commands=False)]
        running = await Service.build(settings, adapters, migrate=False)
        await running.start()
        try:
            yield telegram, discord
        finally:
            await running.stop()


async def both_sent(
    telegram: FakeTelegram, discord: FakeDiscord, tg: int, dc: int
) -> tuple[list[str], list[str]]:
    await telegram.wait_for_sent(tg, timeout=15)
    await discord.wait_for_sent(dc, timeout=15)
    await asyncio.sleep(0.3)  # nothing more comes
    return [s.plain_text for s in telegram.sent], [s.content for s in discord.sent]


def send_voices(telegram: FakeTelegram, discord: FakeDiscord, *, seconds: int = 3) -> None:
    telegram.push_message(ALICE, None, user_id=ALICE, voice=AUDIO, voice_seconds=seconds)
    dm(
        discord,
        "",
        attachments=[FakeAttachment("voice-message.ogg", AUDIO, "audio/ogg", voice_seconds=seconds)],
    )


def notices_in(texts: list[str]) -> list[str]:
    """What the service itself said (the fake model's answers start "reply: ")."""
    return [t for t in texts if not t.startswith("reply: ")]


async def conversation_text(store: Store, key: str) -> str:
    info = await store.current_session(key)
    assert info is not None
    return "\n".join(m.text for m in await store.messages_after(info.id, 0))


async def test_voice_notes_are_transcribed_on_telegram_and_discord(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    responder = ChatResponder()
    async with FakeTranscription(api_key=KEY) as stt:
        stt.transcripts[AUDIO] = "remind me to water the ferns"
        config = {"url": stt.url, "model": "whisper-large-v3"}
        async with service(tmp_path, db_url, responder, transcription=config, transcription_api_key=KEY) as (
            tg,
            dc,
        ):
            send_voices(tg, dc)
            tg_texts, dc_texts = await both_sent(tg, dc, 1, 1)
    assert [(r.model, r.data, r.authorization) for r in stt.requests] == [
        ("whisper-large-v3", AUDIO, f"Bearer {KEY}")
    ] * 2
    assert tg_texts == ["reply: (voice, transcribed) remind me to water the ferns"]
    assert dc_texts == ["reply: (voice, transcribed) remind me to water the ferns"]
    for key in (TG_KEY, DC_KEY):
        text = await conversation_text(store, key)
        assert "(voice, transcribed) remind me to water the ferns" in text
        assert "[attachment: voice" in text  # the audio's reference stays with the message


async def test_a_local_program_can_transcribe(tmp_path: Path, db_url: str, store: Store) -> None:
    script = tmp_path / "stt.py"
    script.write_text(
        "import sys, pathlib; print('heard', len(pathlib.Path(sys.argv[1]).read_bytes()), 'bytes')\n"
    )
    config = {"command": f"{sys.executable} {script} {{file}}"}
    responder = ChatResponder()
    async with service(tmp_path, db_url, responder, transcription=config) as (tg, dc):
        send_voices(tg, dc)
        tg_texts, dc_texts = await both_sent(tg, dc, 1, 1)
    assert tg_texts == dc_texts == [f"reply: (voice, transcribed) heard {len(AUDIO)} bytes"]


async def test_without_a_backend_the_sender_is_told_in_one_line(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    responder = ChatResponder()
    async with service(tmp_path, db_url, responder, transcription={}) as (tg, dc):
        send_voices(tg, dc)
        tg_texts, dc_texts = await both_sent(tg, dc, 2, 2)
    for texts in (tg_texts, dc_texts):
        notices = [t for t in notices_in(texts) if "voice notes are not enabled" in t]
        assert len(notices) == 1 and "\n" not in notices[0]
    assert "[attachment: voice" in await conversation_text(store, TG_KEY)  # kept, not dropped


async def test_a_recording_over_the_duration_cap_is_not_sent_for_transcription(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    responder = ChatResponder()
    async with FakeTranscription() as stt:
        config = {"url": stt.url, "max_seconds": 60}
        async with service(tmp_path, db_url, responder, transcription=config) as (tg, dc):
            send_voices(tg, dc, seconds=600)
            tg_texts, dc_texts = await both_sent(tg, dc, 2, 2)
    assert stt.requests == []
    for texts in (tg_texts, dc_texts):
        assert sum("too long for me to transcribe" in t for t in notices_in(texts)) == 1


async def test_a_recording_over_the_size_cap_is_not_sent_for_transcription(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    responder = ChatResponder()
    async with FakeTranscription() as stt:
        config = {"url": stt.url, "max_bytes": 1000}
        big = AUDIO * 10
        async with service(tmp_path, db_url, responder, transcription=config) as (tg, _):
            tg.push_message(ALICE, None, user_id=ALICE, voice=big)
            tg_texts = [s.plain_text for s in await tg.wait_for_sent(2, timeout=15)]
    assert stt.requests == []
    assert sum("too large for me to transcribe" in t for t in notices_in(tg_texts)) == 1


async def test_the_backend_down_gets_one_clear_reply_and_nothing_is_lost(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    responder = ChatResponder()
    async with FakeTranscription() as stt:
        stt.fail_next(500, times=2)
        async with service(tmp_path, db_url, responder, transcription={"url": stt.url}) as (tg, dc):
            send_voices(tg, dc)
            tg_texts, dc_texts = await both_sent(tg, dc, 2, 2)
    for texts in (tg_texts, dc_texts):
        failures = [t for t in notices_in(texts) if "couldn't transcribe it" in t]
        assert len(failures) == 1 and "not reachable" not in failures[0]
    for key in (TG_KEY, DC_KEY):
        assert "[attachment: voice" in await conversation_text(store, key)


async def test_a_malformed_answer_gets_one_clear_reply_and_nothing_is_lost(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    responder = ChatResponder()
    async with FakeTranscription() as stt:
        stt.answer_next(RawAnswer(deep_json()), times=2)
        async with service(tmp_path, db_url, responder, transcription={"url": stt.url}) as (tg, dc):
            send_voices(tg, dc)
            tg_texts, dc_texts = await both_sent(tg, dc, 2, 2)
    for texts in (tg_texts, dc_texts):
        failures = [t for t in notices_in(texts) if "couldn't transcribe it" in t]
        assert len(failures) == 1 and "could not read" in failures[0]
    for key in (TG_KEY, DC_KEY):
        assert "[attachment: voice" in await conversation_text(store, key)


async def test_a_transcript_over_max_chars_is_cut_with_a_note(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    responder = ChatResponder()
    async with FakeTranscription() as stt:
        stt.transcripts[AUDIO] = "blah " * 10_000
        config = {"url": stt.url, "max_chars": 1000}
        async with service(tmp_path, db_url, responder, transcription=config) as (tg, dc):
            send_voices(tg, dc)
            await both_sent(tg, dc, 1, 1)
    for key in (TG_KEY, DC_KEY):
        text = await conversation_text(store, key)
        kept = text[text.index("(voice, transcribed) ") :].split(" … ")[0]
        assert len(kept) == len("(voice, transcribed) ") + 1000
        assert "[transcript cut: the first 1,000 of 49,999 characters]" in text
