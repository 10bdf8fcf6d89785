"""The one inbound message type and the adapter interface every platform implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from agent.clock import utcnow
from gateway.errors import AdapterError, DeliveryRefused, DraftRefused
from gateway.platforms.pacing import RatePacer
from gateway.wire import AttachmentKind

ChatType = Literal["dm", "group", "channel"]
TextFormat = Literal["plain", "markdown", "html"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """Metadata of a file that came with a message; ``text`` is set when we read it as text."""

    kind: AttachmentKind
    file_id: str | None = None
    file_name: str | None = None
    mime_type: str | None = None
    size: int | None = None
    text: str | None = None
    note: str | None = None
    duration: float | None = None
    """Seconds of a voice note or audio file, when the platform says."""


@dataclass(frozen=True, slots=True)
class WebhookOrigin:
    """A message a webhook route posted into a chat: its signature was its authorization, it
    carries no command, quotes nothing, and a burst of them is served together."""

    route: str
    deliver_only: bool = False
    """Relay the text as a plain message, no model call."""
    coalesce_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A message from any platform, in our own shape.

    ``addressed`` is True when the bot should answer: a DM, a mention, a reply to the
    bot, or a command addressed to it. Unaddressed group messages are ambient context.
    ``from_bot`` marks another bot's message (the gateway applies :mod:`gateway.platforms.manners`).
    """

    platform: str
    chat_id: str
    user_id: str
    text: str
    platform_message_id: str | None = None
    thread_id: str | None = None
    user_name: str | None = None
    chat_type: ChatType = "dm"
    addressed: bool = True
    attachments: tuple[Attachment, ...] = ()
    timestamp: datetime = field(default_factory=utcnow)
    edited: bool = False
    reply_to_message_id: str | None = None
    from_bot: bool = False
    webhook: WebhookOrigin | None = None
    """Set by the webhooks platform only (gateway.platforms.webhooks)."""

    @property
    def is_dm(self) -> bool:
        return self.chat_type == "dm"


@dataclass(frozen=True, slots=True)
class OutboundTarget:
    """Where a reply goes."""

    platform: str
    chat_id: str
    thread_id: str | None = None
    reply_to_message_id: str | None = None


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """A chat command as a platform may offer it natively (Discord application commands).

    ``argument`` names the one free-text option (``/compact [focus]``); ``private`` answers go
    only to the caller where the platform can do that; ``slow`` ones may take longer than a
    platform's answer window (they are acknowledged first and answered after).
    """

    name: str
    description: str
    argument: str | None = None
    argument_description: str = ""
    argument_required: bool = False
    private: bool = False
    slow: bool = False


InboundHandler = Callable[[InboundMessage], Awaitable[None]]
"""The gateway's intake: returns once the message is committed to SQL (an adapter may
acknowledge the update to its platform only after this returns)."""


class PlatformAdapter(ABC):
    """A platform connection: receives updates, hands them to the gateway, sends replies.

    Lifecycle: ``start`` (connect and begin intake) then ``stop``; sending before
    ``start`` raises :class:`agent.errors.AdapterError`.
    """

    name: str = "platform"
    text_limit: int = 4096
    """Longest message the platform accepts, in :meth:`measure` units."""
    text_format: TextFormat = "plain"
    """How the adapter renders the model's Markdown-ish text: as is ("plain", "markdown") or
    converted ("html"); :meth:`send` does the conversion and falls back to plain text."""

    @abstractmethod
    async def start(self, handler: InboundHandler) -> None:
        """Connect and begin delivering inbound messages to ``handler``."""

    sends_alone: bool = False
    """Can :meth:`start_sending`: connect for sending only (REST), without intake."""

    @property
    def shared_intake(self) -> bool:
        """True when several processes may run this intake at once (a webhook behind a load
        balancer: each update goes to one of them); False when one must be elected (a poller, a
        gateway connection that would see every event twice)."""
        return False

    def twin(self) -> PlatformAdapter:
        """A fresh, unstarted adapter with this one's configuration (a sender next to an intake)."""
        raise AdapterError(f"{self.name} has no twin")

    async def start_sending(self) -> None:
        """Connect for sending only, no intake (a cluster worker delivers any reply this way)."""
        raise AdapterError(f"{self.name} cannot send without its intake")

    def share_rate_limits(self, pacer: RatePacer) -> None:
        """Before :meth:`start`: pace sends through ``pacer`` (shared by the cluster) rather than in
        this process only. The default keeps the platform library's own, per-process limits."""
        return

    @abstractmethod
    async def stop(self) -> None:
        """Stop intake and disconnect; idempotent."""

    @abstractmethod
    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        """Send one message part (already within the limit); returns the platform message ids."""

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        """The bytes of a file that came with a message (at most ``max_bytes``)."""
        raise AdapterError(f"{self.name} cannot fetch files")

    async def send_typing(self, target: OutboundTarget) -> None:
        """Show a typing indicator where the platform has one."""
        return None

    def measure(self, text: str) -> int:
        """The length of ``text`` as the platform counts it (code points by default)."""
        return len(text)

    def refuse_oversized(self, text: str) -> None:
        """Raise :class:`DeliveryRefused` when ``text`` is over :attr:`text_limit`.

        Delivery splits a reply to the limit, once (:mod:`gateway.outbound.delivery`); an adapter
        handed a longer part has been called wrongly, and splitting it again here would hide that.
        """
        size = self.measure(text)
        if size > self.text_limit:
            raise DeliveryRefused(
                f"{self.name}: a message of {size:,} characters is over the limit of {self.text_limit:,};"
                " split it before sending (gateway.splitter.split_message)"
            )

    streams: bool = False
    """Can show a reply while it is written: :meth:`stream_send` one message, then :meth:`edit` it."""
    edit_interval_seconds: float | None = None
    """At most one edit of a streamed reply per chat this often; None: ``delivery.edit_interval_seconds``
    (a platform's rate limits). One with none (the API's server-sent events) sets its own."""

    def streams_to(self, target: OutboundTarget) -> bool:
        """Whether the reply to ``target`` is shown while written (the API: when the request asked)."""
        return self.streams

    async def stream_send(self, target: OutboundTarget, text: str) -> str:
        """Post one message of a streamed reply (``text`` fits the limit); returns its id."""
        ids = await self.send(target, text)
        if not ids:
            raise AdapterError(f"{self.name}: nothing was posted")
        return ids[0]

    async def edit(self, target: OutboundTarget, message_id: str, text: str) -> None:
        """Replace the text of one of our messages (``text`` fits the limit)."""
        raise AdapterError(f"{self.name} cannot edit messages")

    async def stream_end(self, target: OutboundTarget) -> None:
        """The streamed reply to ``target`` is complete (nothing more will be edited)."""
        return None

    @property
    def draft_refresh_seconds(self) -> float:
        """A draft is shown again at least this often (it lapses on its own when not refreshed)."""
        return 20.0

    def drafts(self, target: OutboundTarget) -> bool:
        """Whether a streamed reply to ``target`` is shown as a draft (a preview that is no message,
        see :meth:`draft`) and sent as messages only when complete."""
        return False

    async def draft(self, target: OutboundTarget, draft_id: int, text: str) -> None:
        """Show ``text`` (it fits the limit) as the draft ``draft_id``; :class:`DraftRefused` when
        the platform will not, and then drafts are off for that chat."""
        raise DraftRefused(f"{self.name} cannot show drafts")

    def continuation(self, target: OutboundTarget) -> OutboundTarget:
        """Where the second and later parts of a long reply go: the same place, not quoting again."""
        return OutboundTarget(target.platform, target.chat_id, target.thread_id, None)
