"""The transcription backends and their settings, against the fake server and a local program."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from agent.errors import ConfigError
from gateway.config import Settings, load_settings
from gateway.errors import MediaError
from gateway.serving.transcription import CommandTranscriber, HttpTranscriber, Transcriber, build_transcriber
from tests.fakes.transcription import FakeTranscription, RawAnswer, deep_json, transcript_bomb
from tests.gateway.telegram_support import free_port
from tests.memory_probe import peak_rss


def test_the_key_comes_from_its_env_var_and_never_from_the_yaml_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HYGIEIA_TRANSCRIPTION_API_KEY", "sk-from-env")
    key = load_settings().transcription_api_key
    assert key is not None and key.get_secret_value() == "sk-from-env"
    config = tmp_path / "hygieia.yaml"
    config.write_text("transcription_api_key: leaked\n")
    monkeypatch.setenv("HYGIEIA_CONFIG", str(config))
    with pytest.raises(ConfigError, match="HYGIEIA_TRANSCRIPTION_API_KEY"):
        load_settings()


def test_neither_url_nor_command_means_voice_notes_are_off() -> None:
    assert build_transcriber(Settings()) is None
    assert isinstance(
        build_transcriber(Settings(media={"transcription": {"command": "stt"}})), CommandTranscriber
    )


async def test_a_wrong_key_is_a_refusal_not_a_transcript() -> None:
    async with FakeTranscription(api_key="right") as fake:
        stt = HttpTranscriber(fake.url, "whisper-1", api_key="wrong", timeout=5)
        with pytest.raises(MediaError, match="refused it"):
            await stt.transcribe(b"audio", "voice.ogg", "audio/ogg")


async def test_a_server_that_is_not_there_is_said_so() -> None:
    stt = HttpTranscriber(f"http://127.0.0.1:{free_port()}/v1", "whisper-1", api_key=None, timeout=5)
    with pytest.raises(MediaError, match="not reachable"):
        await stt.transcribe(b"audio", "voice.ogg", "audio/ogg")


async def test_a_program_that_fails_or_hangs_is_a_failure(tmp_path: Path) -> None:
    with pytest.raises(MediaError, match="failed"):
        await CommandTranscriber(f"{sys.executable} -c 'raise SystemExit(3)'", timeout=5).transcribe(
            b"a", "v.ogg", None
        )
    slow = CommandTranscriber(f"{sys.executable} -c 'import time; time.sleep(30)'", timeout=0.5)
    with pytest.raises(MediaError, match="too long"):
        await slow.transcribe(b"a", "v.ogg", None)


def default_transcriber(url: str) -> Transcriber:
    built = build_transcriber(Settings(media={"transcription": {"url": url}}))
    assert built is not None
    return built


async def test_a_gzip_bomb_answer_is_refused_in_bounded_memory() -> None:
    transcript_bomb()  # made before measuring: the server's share is not the client's
    async with FakeTranscription() as fake:
        fake.answer_next(RawAnswer(transcript_bomb(), gzip=True))
        with peak_rss() as peak, pytest.raises(MediaError, match="could not read"):
            await default_transcriber(fake.url).transcribe(b"audio", "voice.ogg", "audio/ogg")
    assert peak.rise < 100 * 1024 * 1024, f"RSS rose {peak.rise / 2**20:.0f} MB"


async def test_an_answer_larger_than_the_cap_is_refused() -> None:
    async with FakeTranscription() as fake:
        fake.answer_next(RawAnswer.of({"text": "word " * 1_000_000}))
        with pytest.raises(MediaError, match="could not read"):
            await default_transcriber(fake.url).transcribe(b"audio", "voice.ogg", "audio/ogg")


@pytest.mark.parametrize(
    "answer",
    [
        RawAnswer(deep_json()),
        RawAnswer(b'{"text": ' + deep_json() + b"}"),
        RawAnswer.of({"text": ["a", "list"]}),
        RawAnswer.of({"text": 42}),
        RawAnswer.of(["text", "hello"]),
        RawAnswer.of({"transcript": "hello"}),
        RawAnswer(b"\x1f\x8b not really gzip", gzip=True),
    ],
    ids=[
        "deep_json",
        "deep_json_in_text",
        "text_is_a_list",
        "text_is_a_number",
        "a_list",
        "no_text",
        "bad_gzip",
    ],
)
async def test_a_malformed_answer_is_a_media_error(answer: RawAnswer) -> None:
    async with FakeTranscription() as fake:
        fake.answer_next(answer)
        with pytest.raises(MediaError, match="could not read"):
            await default_transcriber(fake.url).transcribe(b"audio", "voice.ogg", "audio/ogg")


async def test_a_long_transcript_within_the_cap_is_read_whole() -> None:
    async with FakeTranscription() as fake:
        fake.transcripts[b"audio"] = "word " * 20_000
        text = await default_transcriber(fake.url).transcribe(b"audio", "voice.ogg", "audio/ogg")
    assert len(text) == 5 * 20_000 - 1  # cutting to max_chars is the loader's, with its note


async def test_a_program_printing_more_than_the_cap_is_stopped_and_cut() -> None:
    # 30 MB on standard output, then 30 s of silence: read whole, it would be a 30 MB transcript.
    program = "import sys, time; sys.stdout.write('a' * 30_000_000); sys.stdout.flush(); time.sleep(30)"
    stt = CommandTranscriber(f'{sys.executable} -c "{program}"', timeout=20, max_output_bytes=1_000_000)
    started = time.monotonic()
    text = await stt.transcribe(b"a", "v.ogg", None)
    assert len(text) == 1_000_000 and time.monotonic() - started < 10
