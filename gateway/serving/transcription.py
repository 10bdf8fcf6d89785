"""Speech to text for voice notes and audio files: an OpenAI-compatible server or a local program.

``media.transcription.url``: ``POST {url}/audio/transcriptions`` with multipart ``file`` and
``model`` (bearer key ``HYGIEIA_TRANSCRIPTION_API_KEY`` when set), answered ``{"text": ...}``.
``media.transcription.command``: a program run without a shell, given the audio file's path
(``{file}`` in the command, else appended), whose standard output is the transcript.
Every failure is a :class:`gateway.errors.MediaError` with a sentence for the sender. The
server's answer is decoded no further than :func:`answer_cap` bytes (a small gzip body can
inflate to gigabytes), and one that is not ``{"text": str}`` is such a failure too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import aiohttp

from agent.bounded_body import ACCEPT_ENCODING, BodyTooLarge, BodyUndecodable, read_bounded
from gateway.config import Settings, TranscriptionSettings
from gateway.errors import MediaError

_log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 200
UNREADABLE = "the transcription service gave an answer I could not read"


def answer_cap(max_chars: int) -> int:
    """The most a transcription answer may decode to: room for ``max_chars`` characters even
    if every one is JSON-escaped, and never under 1 MB (a longer transcript is cut, not refused)."""
    return max(1_000_000, 12 * max_chars)


class Transcriber(ABC):
    """Turns one recording into text."""

    @abstractmethod
    async def transcribe(self, data: bytes, file_name: str, mime_type: str | None) -> str:
        """The transcript; raises :class:`MediaError` when it cannot be had."""


class HttpTranscriber(Transcriber):
    """An OpenAI-compatible ``/audio/transcriptions`` endpoint."""

    def __init__(
        self, url: str, model: str, *, api_key: str | None, timeout: float, max_answer_bytes: int = 1_000_000
    ) -> None:
        self._endpoint = url.rstrip("/") + "/audio/transcriptions"
        self._model = model
        self._api_key = api_key
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._max_answer = max_answer_bytes

    async def transcribe(self, data: bytes, file_name: str, mime_type: str | None) -> str:
        form = aiohttp.FormData()
        form.add_field("file", data, filename=file_name, content_type=mime_type or "application/octet-stream")
        form.add_field("model", self._model)
        headers = {"Accept-Encoding": ACCEPT_ENCODING}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            async with (
                aiohttp.ClientSession(timeout=self._timeout, auto_decompress=False) as http,
                http.post(self._endpoint, data=form, headers=headers) as response,
            ):
                raw = await read_bounded(
                    response.content, response.headers.get("Content-Encoding"), self._max_answer
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            _log.warning("transcription server unreachable: %r", exc)
            raise MediaError("the transcription service is not reachable right now") from exc
        except (BodyTooLarge, BodyUndecodable) as exc:
            _log.warning("transcription answer refused: %s", exc)
            raise MediaError(UNREADABLE) from exc
        if response.status != 200:
            detail = raw[:MAX_ERROR_CHARS].decode("utf-8", "replace")
            _log.warning("transcription server answered %s: %s", response.status, detail)
            raise MediaError(f"the transcription service refused it (HTTP {response.status})")
        try:
            body: Any = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            _log.warning("transcription answer is not JSON (%s)", type(exc).__name__)
            raise MediaError(UNREADABLE) from exc
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            _log.warning("transcription answer has no text string")
            raise MediaError(UNREADABLE)
        return text.strip()


class CommandTranscriber(Transcriber):
    """A local program: the audio file's path in, the transcript on standard output."""

    def __init__(self, command: str, *, timeout: float, max_output_bytes: int = 1_000_000) -> None:
        self._argv = shlex.split(command)
        if not self._argv:
            raise ValueError("media.transcription.command is empty")
        self._timeout = timeout
        self._max_output = max_output_bytes

    async def transcribe(self, data: bytes, file_name: str, mime_type: str | None) -> str:
        suffix = Path(file_name).suffix or ".audio"
        with tempfile.TemporaryDirectory(prefix="hygieia-audio-") as folder:
            path = Path(folder) / f"recording{suffix}"
            await asyncio.to_thread(path.write_bytes, data)
            argv = [part.replace("{file}", str(path)) for part in self._argv]
            if not any("{file}" in part for part in self._argv):
                argv.append(str(path))
            try:
                process = await asyncio.create_subprocess_exec(
                    *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
                )
            except OSError as exc:
                _log.warning("transcription command could not start: %r", exc)
                raise MediaError("the transcription program could not be started") from exc
            try:
                out, err = await asyncio.wait_for(self._outputs(process), self._timeout)
            except TimeoutError as exc:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
                raise MediaError("transcribing it took too long") from exc
        if len(out) > self._max_output:
            # More than any transcript the loader keeps: the program is stopped, what came is cut.
            _log.warning("transcription command printed more than %d bytes; stopped", self._max_output)
            return out[: self._max_output].decode("utf-8", errors="replace").strip()
        if process.returncode != 0:
            _log.warning(
                "transcription command exited %s: %s", process.returncode, err.decode(errors="replace")[:200]
            )
            raise MediaError("the transcription program failed")
        return out.decode("utf-8", errors="replace").strip()

    async def _outputs(self, process: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
        """Its standard output (one byte past the cap at most: the program is then killed) and
        the first 4 KB of its errors (the rest read and dropped: progress lines may be many)."""

        async def output(stream: asyncio.StreamReader) -> bytes:
            read = bytearray()
            while piece := await stream.read(65536):
                read += piece
                if len(read) > self._max_output:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    return bytes(read[: self._max_output + 1])
            return bytes(read)

        async def errors(stream: asyncio.StreamReader) -> bytes:
            kept = bytearray()
            while piece := await stream.read(65536):
                kept += piece[: max(0, 4096 - len(kept))]
            return bytes(kept)

        assert process.stdout is not None and process.stderr is not None
        out, err = await asyncio.gather(output(process.stdout), errors(process.stderr))
        await process.wait()
        return out, err


def build_transcriber(settings: Settings) -> Transcriber | None:
    """The configured backend (the server when both are set), or None when voice notes are off."""
    config: TranscriptionSettings = settings.media.transcription
    key = settings.transcription_api_key.get_secret_value() if settings.transcription_api_key else None
    if config.url:
        return HttpTranscriber(
            config.url,
            config.model,
            api_key=key,
            timeout=config.timeout_seconds,
            max_answer_bytes=answer_cap(config.max_chars),
        )
    if config.command:
        return CommandTranscriber(
            config.command, timeout=config.timeout_seconds, max_output_bytes=answer_cap(config.max_chars)
        )
    return None
