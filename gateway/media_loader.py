"""Attachments become what the model sees: image and document blocks next to the message text.

The inbox keeps only an attachment's description and its platform file reference (persisted
first, as every message); the file is fetched from the platform when the message is added to
the conversation, converted (:mod:`gateway.media`) in a worker thread, and stored once, in
that message's content. Its search text stays ``[image]``: the base64 is never indexed.

Budgets: at most ``media.max_images_per_message`` pictures per message and
``media.max_session_images`` in the conversation's active part. What cannot be shown — a file
too large, of a kind the model cannot read, over budget — is named in the message (so the
model knows) and in one short notice to the user.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from agent.errors import AdapterError
from agent.types import AgentSession, ChatMessage, ContentBlock, text_block
from gateway.config import MediaSettings
from gateway.inbound import user_message
from gateway.media import MediaError, prepare_image, prepare_pdf, reads_pdfs
from gateway.platforms.base import Attachment, PlatformAdapter
from gateway.store.records import InboxRecord
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff"}


def _kind(a: dict[str, Any]) -> str | None:
    """ "image", "pdf", "unreadable" (a document we cannot read), or None (nothing to do)."""
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


class MediaLoader:
    """Builds a stored message's content with its pictures and PDFs; see the module docstring."""

    def __init__(
        self, store: Store, adapter_for: Callable[[str], PlatformAdapter | None], settings: MediaSettings
    ) -> None:
        self._store = store
        self._adapter_for = adapter_for
        self._settings = settings

    async def message_for(self, session: AgentSession, item: InboxRecord) -> tuple[ChatMessage, list[str]]:
        """The conversation message for ``item``, and what could not be shown (for a notice)."""
        message = user_message(item)
        found = [(a, _kind(a)) for a in item.payload.get("attachments") or []]
        wanted = [(a, kind) for a, kind in found if kind is not None]
        if not wanted or not self._settings.enabled:
            return message, []
        blocks: list[ContentBlock] = []
        problems: list[str] = []
        images_left = await self._image_budget(session) if any(k == "image" for _, k in wanted) else 0
        for attachment, kind in wanted:
            name = str(attachment.get("file_name") or ("the picture" if kind == "image" else "the file"))
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

    async def _image_budget(self, session: AgentSession) -> int:
        active = await self._store.load_active(session.id)
        held = sum(1 for m in active for b in m.content if b.get("type") == "image")
        per_message = self._settings.max_images_per_message
        return max(0, min(per_message, self._settings.max_session_images - held))

    async def _fetch(self, platform: str, attachment: dict[str, Any]) -> bytes:
        size = attachment.get("size")
        limit = self._settings.max_download_bytes
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
        if kind == "image":
            image = await asyncio.to_thread(prepare_image, data, max_edge=settings.max_image_edge)
            return image.block()
        pdf = await asyncio.to_thread(
            prepare_pdf,
            data,
            as_document=reads_pdfs(model),
            max_pages=settings.max_pdf_pages,
            max_chars=settings.max_pdf_text_chars,
        )
        if pdf.note:
            problems.append(f"{name}: {pdf.note}")
        return pdf.block(name)


def _attachment(data: dict[str, Any]) -> Attachment:
    return Attachment(
        kind=data.get("kind", "other"),
        file_id=data.get("file_id"),
        file_name=data.get("file_name"),
        mime_type=data.get("mime_type"),
        size=data.get("size"),
    )
