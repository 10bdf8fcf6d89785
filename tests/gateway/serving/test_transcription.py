"""The transcription backends and their settings, against the fake server and a local program."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent.errors import ConfigError
from gateway.config import Settings, load_settings
from gateway.errors import MediaError
from gateway.serving.transcription import CommandTranscriber, HttpTranscriber, build_transcriber
from tests.fakes.transcription import FakeTranscription
from tests.gateway.telegram_support import free_port


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
