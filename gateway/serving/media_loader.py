"""Attachments become what the model sees: image and document blocks next to the message text.

The inbox keeps only an attachment's description and its platform file reference (persisted
first, as every message); the file is fetched from the platform when the message is added to
the conversation, converted (:mod:`gateway.serving.media`) in a worker thread, and stored once, in
that message's content. Its search text stays ``[image]``: the base64 is never indexed.

Voice notes and audio files are transcribed (:mod:`gateway.serving.transcription`) and join the
message as a text block marked "(voice, transcribed)"; the attachment line (the audio's
reference) stays. Off, too long, too large or failed: named in the notice, never dropped silently.

Budgets: at most ``media.max_images_per_message`` pictures per message and
``media.max_session_images`` in the conversation's active part. What cannot be shown — a file
too large, of a kind the model cannot read, over budget — is named in the message (so the
model knows) and in one short notice to the user.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath
from typing import TypeVar

from agent.types import AgentSession, ChatMessage, ContentBlock, text_block
from gateway.config import MediaSettings
from gateway.errors import AdapterError, MediaError
from gateway.platforms.base import Attachment, PlatformAdapter
from gateway.serving.inbound import InboxItem, user_message
from gateway.serving.media import prepare_image, prepare_pdf, reads_pdfs
from gateway.serving.transcription import Transcriber
from gateway.store.repository import Store
from gateway.wire import AttachmentPayload

_log = logging.getLogger(__name__)
T = TypeVar("T")

_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"}


def _kind(a: AttachmentPayload) -> str | None:
    """ "image", "pdf", "audio" (a voice note or audio file to transcribe), "unreadable" (a document
    we cannot read), or None (nothing to do)."""
    if a.get("text") is None and a.get("kind") in ("voice", "audio"):
        return "audio"
    if a.get("text") is not None or a.get("kind") not in ("photo", "document"):
        return None
    mime = str(a.get("mime_type") or "").lower()
    suffix = PurePosixPath(str(a.get("file_name") or "")).suffix.lower()
    if a.get("kind") == "photo" or mime.startswith("image/") or suffix in _IMAGE_SUFFIXES:
        return "image"
    if mime == "application/pdf" or suffix == ".pdf":
        return "pdf"
    return "unreadable"


def media_notice(problems: list[str]) -> str:
    """One short notice about what could not be shown to the model."""
    if len(problems) == 1:
        return f"I couldn't take in everything you sent — {problems[0]}."
    return "I couldn't take in everything you sent:\n" + "\n".join(f"• {p}" for p in problems)


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{n / 1000:.0f} KB"


# Always the same thread: glibc gives each thread its own malloc arena and keeps what is freed
# there, so decodes landing on different threads of the shared pool (busy with SQLite work)
# each kept a picture's worth of memory (three one after the other: 1.9x one picture's).
_DECODER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hygieia-media-decode")


async def _decoded(work: Callable[[], T]) -> T:
    """``work`` run on the decoding thread."""
    return await asyncio.get_running_loop().run_in_executor(_DECODER, work)


class MediaLoader:
    """Builds a stored message's content with its pictures and PDFs; see the module docstring."""

    def __init__(
        self,
        store: Store,
        adapter_for: Callable[[str], PlatformAdapter | None],
        settings: MediaSettings,
        *,
        transcriber: Transcriber | None = None,
    ) -> None:
        self._store = store
        self._adapter_for = adapter_for
        self._settings = settings
        self._transcriber = transcriber
        # One file decoded at a time in this process: the bound on one picture's memory
        # (docs/media.md) is then the bound for all of them, however many chats send at once.
        self._decoding = asyncio.Semaphore(1)

    async def message_for(self, session: AgentSession, item: InboxItem) -> tuple[ChatMessage, list[str]]:
        """The conversation message for ``item``, and what could not be shown (for a notice)."""
        message = user_message(item)
        found = [(a, _kind(a)) for a in item.payload["attachments"]]
        wanted = [(a, kind) for a, kind in found if kind is not None]
        if not wanted or not self._settings.enabled:
            return message, []
        blocks: list[ContentBlock] = []
        problems: list[str] = []
        images_left = await self._image_budget(session) if any(k == "image" for _, k in wanted) else 0
        for attachment, kind in wanted:
            name = str(attachment.get("file_name") or _default_name(kind, attachment))
            if kind == "audio":
                transcript = await self._transcript(item.platform, attachment, name, problems)
                if transcript is not None:
                    blocks.append(transcript)
                continue
            if kind == "unreadable":
                problems.append(f"{name}: I can read pictures, PDFs and text files, not this kind of file")
                continue
            if kind == "image" and images_left <= 0:
                problems.append(
                    f"{name}: this conversation already holds as many pictures as I keep at once "
                    f"({self._settings.max_session_images}; /compact or /new makes room)"
                    if self._settings.max_session_images
                    else f"{name}: pictures are switched off here"
                )
                continue
            try:
                data = await self._fetch(item.platform, attachment)
                block = await self._convert(kind, data, name, session.model, problems)
            except MediaError as exc:
                problems.append(f"{name}: {exc}")
                continue
            blocks.append(block)
            if kind == "image":
                images_left -= 1
        content = list(message.content)
        if problems:
            content.append(text_block("\n".join(f"[attachment: {p}]" for p in problems)))
        return message.with_content(content + blocks), problems

    async def _transcript(
        self, platform: str, attachment: AttachmentPayload, name: str, problems: list[str]
    ) -> ContentBlock | None:
        """The recording as a text block marked transcribed; None (and a problem named) when it is not."""
        config = self._settings.transcription
        if self._transcriber is None:
            problems.append(
                f"{name}: voice notes are not enabled here, so I can't listen to it; please type it"
            )
            return None
        duration = attachment.get("duration")
        if isinstance(duration, int | float) and duration > config.max_seconds:
            problems.append(
                f"{name}: it is too long for me to transcribe "
                f"({duration:.0f} s; I take up to {config.max_seconds} s)"
            )
            return None
        size = attachment.get("size")
        if isinstance(size, int) and size > config.max_bytes:
            problems.append(
                f"{name}: it is too large for me to transcribe "
                f"({_size(size)}; up to {_size(config.max_bytes)})"
            )
            return None
        try:
            data = await self._fetch(platform, attachment, limit=config.max_bytes)
            text = await self._transcriber.transcribe(
                data, _file_name(attachment), attachment.get("mime_type")
            )
        except MediaError as exc:
            problems.append(f"{name}: I couldn't transcribe it — {exc}; please try again or type it")
            return None
        if not text:
            problems.append(f"{name}: I couldn't make out any words in it")
            return None
        if len(text) > config.max_chars:
            text = (
                f"{text[: config.max_chars]} … [transcript cut: the first {config.max_chars:,} of "
                f"{len(text):,} characters]"
            )
        return text_block(f"(voice, transcribed) {text}")

    async def _image_budget(self, session: AgentSession) -> int:
        active = await self._store.load_active(session.id)
        held = sum(1 for m in active for b in m.content if b.get("type") == "image")
        per_message = self._settings.max_images_per_message
        return max(0, min(per_message, self._settings.max_session_images - held))

    async def _fetch(
        self, platform: str, attachment: AttachmentPayload, *, limit: int | None = None
    ) -> bytes:
        size = attachment.get("size")
        limit = min(limit, self._settings.max_download_bytes) if limit else self._settings.max_download_bytes
        if isinstance(size, int) and size > limit:
            raise MediaError(f"it is too large for me ({_size(size)}; I read files up to {_size(limit)})")
        adapter = self._adapter_for(platform)
        if adapter is None:
            raise MediaError("it could not be fetched (its platform is not running here)")
        try:
            data = await adapter.download(_attachment(attachment), limit)
        except AdapterError as exc:
            _log.warning("could not fetch an attachment: %s", exc, extra={"platform": platform})
            raise MediaError("it could not be fetched; please send it again") from exc
        return data

    async def _convert(
        self, kind: str, data: bytes, name: str, model: str, problems: list[str]
    ) -> ContentBlock:
        settings = self._settings
        async with self._decoding:
            if kind == "image":
                image = await _decoded(
                    functools.partial(prepare_image, data, max_edge=settings.max_image_edge)
                )
                return image.block()
            pdf = await _decoded(
                functools.partial(
                    prepare_pdf,
                    data,
                    as_document=reads_pdfs(model),
                    max_pages=settings.max_pdf_pages,
                    max_chars=settings.max_pdf_text_chars,
                )
            )
        if pdf.note:
            problems.append(f"{name}: {pdf.note}")
        return pdf.block(name)


def _default_name(kind: str | None, attachment: AttachmentPayload) -> str:
    if kind == "image":
        return "the picture"
    if kind == "audio":
        return "the voice message" if attachment.get("kind") == "voice" else "the audio file"
    return "the file"


def _file_name(attachment: AttachmentPayload) -> str:
    """A name with a suffix the transcription backend can tell the format from."""
    if attachment.get("file_name"):
        return str(attachment["file_name"])
    mime = str(attachment.get("mime_type") or "")
    suffix = {"audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/wav": ".wav"}.get(
        mime, ".ogg"
    )
    return f"voice{suffix}"


def _attachment(data: AttachmentPayload) -> Attachment:
    return Attachment(
        kind=data["kind"],
        file_id=data.get("file_id"),
        file_name=data.get("file_name"),
        mime_type=data.get("mime_type"),
        size=data.get("size"),
    )
