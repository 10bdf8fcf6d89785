"""discord.py ``Message`` -> :class:`InboundMessage`: who spoke, where, whether to us, what came with it."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

import aiohttp
import discord

from gateway.platforms.base import Attachment, ChatType, InboundMessage
from gateway.platforms.text_files import MAX_DOWNLOAD_BYTES, MAX_TEXT_BYTES, decode_capped, looks_binary

_log = logging.getLogger(__name__)

PLATFORM = "discord"
_CONVERSATIONAL = (discord.MessageType.default, discord.MessageType.reply)
_TEXT_MIMES = frozenset(
    {"application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml"}
)
_TEXT_SUFFIXES = frozenset(
    {".txt", ".md", ".rst", ".csv", ".tsv", ".log", ".json", ".yaml", ".yml", ".toml", ".ini", ".xml"}
    | {".py", ".js", ".ts", ".go", ".rs", ".java", ".c", ".h", ".cpp", ".sh", ".sql", ".html", ".css"}
)


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """``max_text_bytes`` of a text attachment are kept (as on Telegram); files above
    ``max_download_bytes`` are not fetched."""

    max_text_bytes: int = MAX_TEXT_BYTES
    download: bool = True
    max_download_bytes: int = MAX_DOWNLOAD_BYTES


def where(message: discord.Message) -> tuple[ChatType, str, str | None]:
    """(chat type, chat id, thread id): a thread is its own channel, its chat is the parent channel."""
    channel = message.channel
    if message.guild is None:
        return "dm", str(channel.id), None
    if isinstance(channel, discord.Thread):
        return "group", str(channel.parent_id), str(channel.id)
    return "group", str(channel.id), None


def is_ours_to_read(message: discord.Message, bot_id: int) -> bool:
    """False for our own messages, webhooks, and system messages (pins, joins...).

    Other bots' messages are read (marked ``from_bot``); the gateway decides whether they are answered.
    """
    author = message.author
    if author.id == bot_id or message.webhook_id is not None:
        return False
    return message.type in _CONVERSATIONAL


def addresses_bot(message: discord.Message, bot_id: int) -> bool:
    """A DM, a mention of the bot, or a reply to one of the bot's messages that names no one else.

    As on Telegram, "@otherbot what do you think?" in reply to us is for the other bot. The reply's
    own ping of us is in ``mentions`` but not in the content, so others are looked for in the content.
    """
    if message.guild is None:
        return True
    if bot_id in message.raw_mentions:
        return True
    reference = message.reference
    resolved = reference.resolved if reference is not None else None
    if isinstance(resolved, discord.Message) and resolved.author.id == bot_id:
        return not message.raw_mentions
    return any(user.id == bot_id for user in message.mentions)


def readable_text(message: discord.Message, bot_id: int) -> str:
    """The content without our mention, other users' mentions shown as ``@name``."""
    leading = re.compile(rf"^\s*<@!?{bot_id}>[\s,:;]*")
    inner = re.compile(rf"[ \t]*<@!?{bot_id}>")
    text = inner.sub("", leading.sub("", message.content))
    for user in message.mentions:
        if user.id != bot_id:
            text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
    return text.strip()


async def to_inbound(
    message: discord.Message,
    *,
    bot_id: int,
    ambient: bool,
    edited: bool = False,
    limits: ReadLimits = ReadLimits(),
) -> InboundMessage | None:
    """Our message for ``message``, or None when it is not for the gateway (see :func:`is_ours_to_read`).

    Unaddressed group messages are kept as ambient context unless ``ambient`` is off.
    """
    if not is_ours_to_read(message, bot_id):
        return None
    addressed = addresses_bot(message, bot_id)
    if not addressed and not ambient:
        return None
    attachments = await _attachments(message, limits)
    if not message.content.strip() and not attachments:
        _log.debug("discord: ignoring message %s with nothing to read", message.id)
        return None
    chat_type, chat_id, thread_id = where(message)
    reference = message.reference
    return InboundMessage(
        platform=PLATFORM,
        chat_id=chat_id,
        user_id=str(message.author.id),
        text=readable_text(message, bot_id),
        platform_message_id=str(message.id),
        thread_id=thread_id,
        user_name=message.author.display_name,
        chat_type=chat_type,
        addressed=addressed,
        attachments=attachments,
        timestamp=(message.edited_at or message.created_at) if edited else message.created_at,
        edited=edited,
        reply_to_message_id=str(reference.message_id) if reference and reference.message_id else None,
        from_bot=message.author.bot,
    )


# --- attachments ---------------------------------------------------------------------------------


async def _attachments(message: discord.Message, limits: ReadLimits) -> tuple[Attachment, ...]:
    found = [await _attachment(item, limits) for item in message.attachments]
    found.extend(Attachment("sticker", str(s.id), note=f"sticker {s.name}") for s in message.stickers)
    return tuple(found)


def attachment_kind(item: discord.Attachment) -> Attachment:
    """The metadata of a Discord attachment: kind from its content type, its URL as the file id."""
    mime = (item.content_type or "").split(";")[0].strip().lower() or None
    base = Attachment("document", item.url, item.filename, mime, item.size)
    major = (mime or "").partition("/")[0]
    if major == "image":
        size = f" {item.width}x{item.height}" if item.width and item.height else ""
        return replace(base, kind="photo", note=f"image{size}")
    if major == "audio" and item.is_voice_message():
        return replace(
            base, kind="voice", note=f"voice message, {item.duration or 0:.0f} s", duration=item.duration
        )
    if major == "audio":
        return replace(base, kind="audio", note="audio", duration=item.duration)
    if major in ("audio", "video"):
        return replace(base, kind="audio" if major == "audio" else "video", note=f"{major}, not read")
    return base


def is_text_like(mime: str | None, file_name: str | None) -> bool:
    if mime and (mime.startswith("text/") or mime in _TEXT_MIMES or mime.endswith(("+json", "+xml"))):
        return True
    return PurePosixPath(file_name or "").suffix.lower() in _TEXT_SUFFIXES


async def _attachment(item: discord.Attachment, limits: ReadLimits) -> Attachment:
    base = attachment_kind(item)
    if base.kind != "document":
        return base
    if not is_text_like(base.mime_type, base.file_name):
        return base  # pictures and PDFs are read when the message joins the conversation
    if item.size > max(limits.max_download_bytes, limits.max_text_bytes):
        return replace(base, note=f"too large to read ({item.size:,} bytes)")
    if not limits.download:
        return replace(base, note="not read (the adapter is stopping)")
    try:
        data = await item.read()
    except (discord.HTTPException, aiohttp.ClientError) as exc:
        _log.warning("discord: could not download attachment %s: %s", item.id, exc)
        return replace(base, note=f"could not be downloaded ({exc})")
    if looks_binary(data):
        return replace(base, note="binary content, not read")
    text, note = decode_capped(data, limits.max_text_bytes)
    return replace(base, text=text, note=note)
