"""A fake OpenAI-compatible speech-to-text server on 127.0.0.1 (``POST /v1/audio/transcriptions``).

As strict as the real one where it matters to us: multipart/form-data only, a ``file`` part with a
filename and a non-empty body and a ``model`` field are required (400 otherwise), the bearer key
is checked when the fake is given one (401), the file is capped at 25 MB (413). The transcript is
what ``transcripts`` maps the audio bytes to, else a default naming the byte count; answers are
``{"text": ...}``. ``fail_next`` scripts errors; ``answer_next`` scripts a raw answer (the hostile
shapes: :func:`transcript_bomb`, :func:`deep_json`, a wrong type).
"""

from __future__ import annotations

import functools
import json
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, web

MAX_FILE_BYTES = 25 * 1024 * 1024
BOMB_CHARS = 300 * 1024 * 1024


@functools.cache
def transcript_bomb() -> bytes:
    """``{"text": "aaaa..."}`` of 300 MB, gzip-compressed to ~0.3 MB."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    chunk = b"a" * (1 << 20)
    out = [packer.compress(b'{"text": "')]
    out.extend(packer.compress(chunk) for _ in range(BOMB_CHARS >> 20))
    out.append(packer.compress(b'"}') + packer.flush())
    return b"".join(out)


def deep_json(depth: int = 100_000) -> bytes:
    return b"[" * depth + b"]" * depth


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """A 200 answer sent as these bytes (``gzip``: with ``Content-Encoding: gzip``)."""

    body: bytes
    gzip: bool = False

    @staticmethod
    def of(value: Any) -> RawAnswer:
        return RawAnswer(json.dumps(value).encode())


@dataclass(frozen=True, slots=True)
class TranscriptionRequest:
    """One accepted request, as the fake saw it."""

    model: str
    file_name: str
    content_type: str | None
    data: bytes
    authorization: str | None


class FakeTranscription:
    """The fake server; use as an async context manager. ``url`` is what ``media.transcription.url`` takes."""

    def __init__(self, *, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.transcripts: dict[bytes, str] = {}
        self.requests: list[TranscriptionRequest] = []
        self._failures: deque[int] = deque()
        self._answers: deque[RawAnswer] = deque()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    async def __aenter__(self) -> FakeTranscription:
        app = web.Application(client_max_size=MAX_FILE_BYTES + 1_000_000)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeTranscription is not started")
        return f"http://127.0.0.1:{self._port}/v1"

    def fail_next(self, status: int, times: int = 1) -> None:
        """Answer the next ``times`` requests with ``status`` (an OpenAI-style error body)."""
        self._failures.extend([status] * times)

    def answer_next(self, answer: RawAnswer, times: int = 1) -> None:
        """Answer the next ``times`` accepted requests with ``answer`` instead of a transcript."""
        self._answers.extend([answer] * times)

    async def _transcribe(self, request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization")
        if self.api_key is not None and authorization != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided", "invalid_api_key")
        if not request.content_type.startswith("multipart/form-data"):
            return _error(400, "Expected multipart/form-data", "invalid_request_error")
        fields: dict[str, Any] = {}
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader) or part.name is None:
                continue
            if part.name == "file":
                data = bytes(await part.read())
                fields["file"] = (part.filename, part.headers.get("Content-Type"), data)
            else:
                fields[part.name] = await part.text()
        if "file" not in fields or not fields["file"][0]:
            return _error(400, "Missing required parameter: 'file'", "invalid_request_error")
        if "model" not in fields or not fields["model"]:
            return _error(400, "Missing required parameter: 'model'", "invalid_request_error")
        file_name, content_type, data = fields["file"]
        if not data:
            return _error(400, "Audio file is empty", "invalid_request_error")
        if len(data) > MAX_FILE_BYTES:
            return _error(413, "Maximum content size limit (26214400) exceeded", "invalid_request_error")
        if self._failures:
            return _error(self._failures.popleft(), "The server had an error", "server_error")
        self.requests.append(
            TranscriptionRequest(fields["model"], file_name, content_type, data, authorization)
        )
        if self._answers:
            raw = self._answers.popleft()
            headers = {"Content-Encoding": "gzip"} if raw.gzip else {}
            return web.Response(body=raw.body, content_type="application/json", headers=headers)
        text = self.transcripts.get(data, f"transcript of {len(data)} bytes")
        return web.json_response({"text": text})


def _error(status: int, message: str, code: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": code, "param": None, "code": code}}, status=status
    )
