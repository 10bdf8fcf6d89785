"""Telegram ``Update`` -> :class:`InboundMessage`: who spoke, where, whether to us, and what came with it.

Pure conversion apart from one side effect: text-like documents are downloaded through the
Bot API file endpoint so the agent can read them.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import warnings
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from telegram import Bot, Document, Message, MessageEntity, Update
from telegram.error import TelegramError

from gateway.platforms.base import Attachment, ChatType, InboundMessage
from gateway.platforms.text_files import MAX_DOWNLOAD_BYTES, MAX_TEXT_BYTES, decode_capped, looks_binary

_log = logging.getLogger(__name__)

PLATFORM = "telegram"
_CHAT_TYPES: dict[str, ChatType] = {
    "private": "dm",
    "group": "group",
    "supergroup": "group",
    "channel": "channel",
}
_TEXT_MIMES = {
    "application/json",
    "application/ld+json",
    "application/x-ndjson",
    "application/xml",
    "application/yaml",
    "application/x-yaml",
    "application/toml",
    "application/javascript",
    "application/x-javascript",
    "application/x-python",
    "application/x-python-code",
    "application/x-sh",
    "application/sql",
    "application/csv",
    "application/x-tex",
}
_TEXT_SUFFIXES = {
    ".txt", ".md", ".markdown", ".rst", ".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".yaml", ".yml",
    ".toml", ".ini", ".cfg", ".conf", ".log", ".xml", ".html", ".htm", ".css", ".py", ".js", ".ts",
    ".tsx", ".jsx", ".sh", ".bash", ".sql", ".rs", ".go", ".java", ".kt", ".c", ".h", ".cc", ".cpp",
    ".hpp", ".rb", ".php", ".swift", ".tex", ".srt", ".vtt", ".env", ".diff", ".patch",
}  # fmt: skip
_FALLBACK_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,32})(@[A-Za-z0-9_]{3,32})?(?=\s|$)")


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who "we" are on Telegram: used to tell our own messages and mentions apart."""

    id: int
    username: str


@dataclass(frozen=True, slots=True)
class DownloadLimits:
    """``max_text_bytes`` of a text document are kept; files above ``max_download_bytes`` are not fetched."""

    max_text_bytes: int = MAX_TEXT_BYTES
    max_download_bytes: int = MAX_DOWNLOAD_BYTES


async def to_inbound(
    update: Update, *, bot: Bot, me: BotIdentity, limits: DownloadLimits, ambient: bool = True
) -> InboundMessage | None:
    """Convert one update; None when it is not for the gateway.

    Not for the gateway: our own messages, service messages, unsupported update types, and
    unaddressed group messages when ``ambient`` is off.
    """
    edited = update.edited_message is not None or update.edited_channel_post is not None
    message = update.message or update.edited_message or update.channel_post or update.edited_channel_post
    if message is None:
        _log.debug("ignoring update %s of an unsupported type", update.update_id)
        return None
    if message.chat is None:  # PTB tolerates a message without a chat; there is nowhere to answer
        _log.warning("ignoring update %s: message without a chat", update.update_id)
        return None
    sender = message.from_user
    if sender is not None and sender.id == me.id:
        return None
    chat_type = _CHAT_TYPES.get(message.chat.type, "group")
    if message.text is not None:
        raw_text, entities = message.text, message.entities
    else:
        raw_text, entities = message.caption or "", message.caption_entities
    addressed, others, text = _addressing(raw_text, tuple(entities or ()), me)
    # A reply to us is a mention, unless it names only someone else ("@otherbot what do you think?").
    addressed = addressed or chat_type == "dm" or (_replies_to(message, me.id) and not others)
    if not addressed and not ambient:
        return None
    attachments = await _attachments(message, bot, limits)
    if not raw_text and not attachments:
        _log.debug("ignoring message %s:%s with nothing to read", message.chat.id, message.message_id)
        return None
    return InboundMessage(
        platform=PLATFORM,
        chat_id=str(message.chat.id),
        user_id=_author(message)[0],
        text=text,
        platform_message_id=f"{message.chat.id}:{message.message_id}",
        thread_id=_topic(message),
        user_name=_author(message)[1],
        chat_type=chat_type,
        addressed=addressed,
        attachments=attachments,
        timestamp=(message.edit_date or message.date) if edited else message.date,
        edited=edited,
        reply_to_message_id=_reply_id(message),
        from_bot=sender is not None and sender.is_bot,
    )


def _author(message: Message) -> tuple[str, str | None]:
    """(user id, display name); a channel post or an anonymous admin speaks as a chat."""
    sender = message.from_user
    if sender is not None:
        return str(sender.id), sender.username or sender.full_name
    origin = message.sender_chat or message.chat
    return str(origin.id), origin.title or origin.username


def _topic(message: Message) -> str | None:
    # In a non-forum supergroup message_thread_id names a reply thread, not a topic: ignore it there.
    if message.is_topic_message and message.message_thread_id:
        return str(message.message_thread_id)
    return None


def _reply_id(message: Message) -> str | None:
    reply = message.reply_to_message
    # In a forum every message "replies" to its topic's creation message: that is no reply.
    if reply is None or reply.forum_topic_created is not None:
        return None
    return f"{message.chat.id}:{reply.message_id}"


def _replies_to(message: Message, bot_id: int) -> bool:
    reply = message.reply_to_message
    return reply is not None and reply.from_user is not None and reply.from_user.id == bot_id


def _addressing(text: str, entities: tuple[MessageEntity, ...], me: BotIdentity) -> tuple[bool, bool, str]:
    """Whether ``text`` addresses the bot, whether it mentions someone else, and the text with our
    mention removed.

    Mentions by @username or text_mention and commands (``/cmd`` or ``/cmd@us``) address us;
    a command for another bot (``/cmd@other``) does not. Entity offsets are UTF-16 units.
    """
    units = text.encode("utf-16-le", "surrogatepass")
    handle = "@" + me.username.lower()
    addressed = False
    foreign_command = False
    others = False
    cuts: list[tuple[int, int]] = []
    for entity in entities:
        start, end = entity.offset, entity.offset + entity.length
        value = units[start * 2 : end * 2].decode("utf-16-le", "surrogatepass")
        if (entity.type == MessageEntity.MENTION and value.lower() == handle) or (
            entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == me.id
        ):
            addressed = True
            cuts.append((start, end))
        elif entity.type == MessageEntity.BOT_COMMAND and start == 0:
            _, _, target = value.partition("@")
            if not target:
                addressed = True
            elif "@" + target.lower() == handle:
                addressed = True
                cuts.append((start + _utf16(value.partition("@")[0]), end))  # keep "/cmd", drop "@us"
            else:
                foreign_command = True
        elif entity.type in (MessageEntity.MENTION, MessageEntity.TEXT_MENTION):
            others = True
    if not entities:
        addressed, foreign_command, cuts = _fallback_addressing(text, me)
        others = _names_someone(text, me)
    return addressed and not foreign_command, others or foreign_command, _cut(units, cuts)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _fallback_addressing(text: str, me: BotIdentity) -> tuple[bool, bool, list[tuple[int, int]]]:
    """Without entities (some clients and bridges), look for the same patterns in the text."""
    cuts: list[tuple[int, int]] = []
    addressed = foreign = False
    m = _FALLBACK_COMMAND.match(text)
    if m is not None:
        target = m.group(2)
        if target is None:
            addressed = True
        elif target.lower() == "@" + me.username.lower():
            addressed = True
            cuts.append((_utf16(text[: m.start(2)]), _utf16(text[: m.end(2)])))
        else:
            foreign = True
    for found in re.finditer(rf"(?<![\w@])@{re.escape(me.username)}\b", text, flags=re.IGNORECASE):
        addressed = True
        cuts.append((_utf16(text[: found.start()]), _utf16(text[: found.end()])))
    return addressed, foreign, cuts


def _names_someone(text: str, me: BotIdentity) -> bool:
    handles = re.findall(r"(?<![\w@])@([A-Za-z0-9_]{3,32})\b", text)
    return any(handle.lower() != me.username.lower() for handle in handles)


def _cut(units: bytes, cuts: list[tuple[int, int]]) -> str:
    """Remove UTF-16 ranges from the text and tidy the whitespace and punctuation they leave."""
    if not cuts:
        return units.decode("utf-16-le", "surrogatepass")
    pieces: list[str] = []
    pos = 0
    for start, end in sorted(cuts):
        pieces.append(units[pos * 2 : start * 2].decode("utf-16-le", "surrogatepass"))
        pos = max(pos, end)
    pieces.append(units[pos * 2 :].decode("utf-16-le", "surrogatepass"))
    out = pieces[0]
    for piece in pieces[1:]:
        if not out.strip():
            out, piece = "", piece.lstrip(" \t,:;")
        elif out.endswith((" ", "\n")) and piece.startswith(" "):
            piece = piece[1:]
        out += piece
    return out.strip()


# --- attachments ---------------------------------------------------------------------------------


async def _attachments(message: Message, bot: Bot, limits: DownloadLimits) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    if message.photo:
        big = message.photo[-1]
        note = f"image {big.width}x{big.height}"
        found.append(Attachment("photo", big.file_id, None, "image/jpeg", big.file_size, note=note))
    if message.animation is not None:  # a GIF comes as both animation and document
        a = message.animation
        found.append(Attachment("video", a.file_id, a.file_name, a.mime_type, a.file_size, note="animation"))
    elif message.document is not None:
        found.append(await _document(message.document, bot, limits))
    if message.voice is not None:
        v = message.voice
        seconds = _seconds(v, "duration")
        note = f"voice message, {seconds} s"
        found.append(
            Attachment("voice", v.file_id, None, v.mime_type, v.file_size, note=note, duration=seconds)
        )
    if message.audio is not None:
        au = message.audio
        seconds = _seconds(au, "duration")
        found.append(
            Attachment(
                "audio", au.file_id, au.file_name, au.mime_type, au.file_size, note="audio", duration=seconds
            )
        )
    if message.video is not None:
        vi = message.video
        found.append(Attachment("video", vi.file_id, vi.file_name, vi.mime_type, vi.file_size, note="video"))
    if message.video_note is not None:
        vn = message.video_note
        found.append(Attachment("video", vn.file_id, size=vn.file_size, note="round video"))
    if message.sticker is not None:
        st = message.sticker
        found.append(Attachment("sticker", st.file_id, note=f"sticker {st.emoji or ''}".strip()))
    if message.location is not None:
        loc = message.location
        found.append(Attachment("other", note=f"location {loc.latitude:.5f},{loc.longitude:.5f}"))
    if message.contact is not None:
        c = message.contact
        found.append(Attachment("other", note=f"contact {c.first_name} {c.phone_number}"))
    if message.poll is not None:
        found.append(Attachment("other", note=f"poll: {message.poll.question}"))
    return tuple(found)


def is_text_like(mime_type: str | None, file_name: str | None) -> bool:
    """True for documents we read as text: text/*, JSON/XML/YAML/... or a source/text extension."""
    mime = (mime_type or "").lower().split(";")[0].strip()
    if mime.startswith("text/") or mime in _TEXT_MIMES or mime.endswith(("+json", "+xml")):
        return True
    return PurePosixPath(file_name or "").suffix.lower() in _TEXT_SUFFIXES


async def _document(doc: Document, bot: Bot, limits: DownloadLimits) -> Attachment:
    base = Attachment("document", doc.file_id, doc.file_name, doc.mime_type, doc.file_size)
    if not is_text_like(doc.mime_type, doc.file_name):
        return base  # pictures and PDFs are read when the message joins the conversation
    if doc.file_size is not None and doc.file_size > limits.max_download_bytes:
        return replace(base, note=f"too large to read ({doc.file_size:,} bytes)")
    try:
        file = await bot.get_file(doc.file_id)
        data = bytes(await file.download_as_bytearray())
    except TelegramError as exc:
        _log.warning("could not download document %s: %s", doc.file_id, exc)
        return replace(base, note=f"could not be downloaded ({exc})")
    if looks_binary(data):
        return replace(base, note="binary content, not read")
    text, note = decode_capped(data, limits.max_text_bytes)
    return replace(base, text=text, note=note)


def _seconds(obj: object, attribute: str) -> int:
    """A duration in whole seconds; PTB 22 warns on these attributes while it moves them to timedelta."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = getattr(obj, attribute)
    if isinstance(value, dt.timedelta):
        return int(value.total_seconds())
    return int(value or 0)
