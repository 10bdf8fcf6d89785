"""Typed rows the store hands to the gateway (the agent's own records live in agent.types)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

InboxStatus = Literal["pending", "processing", "done", "failed", "ignored"]
OutboxStatus = Literal["pending", "sent", "failed"]
OutboxKind = Literal["reply", "notice", "failure_notice"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A conversation; ``system_prompt`` is frozen at creation (prompt caching relies on it)."""

    id: str
    key: str
    platform: str
    chat_id: str
    thread_id: str | None
    user_id: str | None
    system_prompt: str
    model: str
    created_at: datetime
    last_activity_at: datetime
    ended_at: datetime | None
    end_reason: str | None
    last_prompt_tokens: int | None
    last_prompt_at: datetime | None
    compaction_count: int
    version: int
    chat_overrides: dict[str, Any] | None = None
    """What the chat's ``overrides:`` entry set when the session began (frozen): summary_model,
    budget_tokens, and ``match`` naming the entry."""
    parent_session_id: str | None = None
    """The chat session whose ``delegate`` call ran this one as a sub-agent; None for a chat."""

    @property
    def ended(self) -> bool:
        return self.ended_at is not None


@dataclass(frozen=True, slots=True)
class SessionSummary(SessionInfo):
    """A session with its counts, for listings."""

    active: int = 0
    archived: int = 0
    compactions: int = 0

    @property
    def last_activity(self) -> datetime:
        return self.last_activity_at


@dataclass(frozen=True, slots=True)
class InboxRecord:
    """A received message waiting for (or done with) processing."""

    id: int
    platform: str
    chat_id: str
    platform_message_id: str | None
    session_key: str
    payload: dict[str, Any]
    addressed: bool
    status: InboxStatus
    attempts: int
    received_at: datetime
    message_id: int | None
    lease_owner: str | None = None
    lease_until: datetime | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    """A reply queued for delivery; ``delivered_ids`` are the platform's ids of the sent parts."""

    id: int
    session_id: str | None
    target: dict[str, Any]
    text: str
    status: OutboxStatus
    attempts: int
    next_attempt_at: datetime
    delivered_ids: list[str]
    error: str | None
    created_at: datetime
    sent_at: datetime | None
    message_id: int | None
    inbox_ids: list[int]
    kind: OutboxKind = "reply"
    stream_id: int | None = None
    """The stream whose messages this reply edits (re-delivered after a takeover), if any."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A received message or a reply given up on (``status = 'failed'``), with its error."""

    source: Literal["inbox", "outbox"]
    id: int
    at: datetime
    attempts: int
    error: str | None
    text: str
    platform: str
    chat_id: str


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """Token usage and cost of a session, summed over its API calls."""

    calls: int = 0
    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """A reply shown while written: its platform messages and what each one shows."""

    id: int
    session_id: str | None
    target: dict[str, Any]
    message_ids: list[str]
    shown: list[str]
    status: str
    session_key: str | None = None
    lease_owner: str | None = None
