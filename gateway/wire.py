"""JSON shapes the gateway stores and reads back, named once (TypedDicts).

A shape is written in one place (intake, a scheduled run) and parsed in one place
(:func:`gateway.serving.inbound.parse_item` after the claim); no raw dict travels past that.
"""

from __future__ import annotations

import re
from typing import Literal, NotRequired, TypedDict

AttachmentKind = Literal["photo", "document", "voice", "audio", "video", "sticker", "other"]


class AttachmentPayload(TypedDict):
    """A file that came with a message: its platform reference, and its text when it was read."""

    kind: AttachmentKind
    file_id: str | None
    file_name: str | None
    mime_type: str | None
    size: int | None
    text: str | None
    note: str | None
    duration: NotRequired[float | None]
    """Seconds of a voice note or audio file, when the platform said (absent in older rows)."""


class WebhookPayload(TypedDict):
    """Marks an inbox item a webhook route posted (gateway.platforms.webhooks)."""

    route: str
    deliver_only: bool


class InboxPayload(TypedDict):
    """The ``inbox.payload`` column: everything needed to rebuild a received message later."""

    edit_of: str | None
    text: str
    user_id: str | None
    user_name: str | None
    chat_type: str | None
    thread_id: str | None
    timestamp: str
    edited: bool
    reply_to_message_id: str | None
    attachments: list[AttachmentPayload]
    truncated_from: int | None
    scheduled_task: NotRequired[str]
    webhook: NotRequired[WebhookPayload]


# The bot's /compact confirmation quotes the focus it was given; an erasure finds the quote by this
# shape (it always closes the confirmation's parenthesis) and replaces it.
FOCUS_QUOTE = re.compile(r", focused on “.*”(?=\)\.\Z)", re.DOTALL)
ERASED_FOCUS_QUOTE = ", focused on a text erased at a user's request"


def focus_quote(focus: str) -> str:
    """The /compact confirmation's quote of its focus (before the closing ``).``)."""
    return f", focused on “{focus}”"
