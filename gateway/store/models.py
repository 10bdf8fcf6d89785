"""The schema, as SQLAlchemy declarative models.

The migrations in ``migrations/versions`` build exactly this (``alembic check`` proves
it), plus what models cannot say: the FTS5 tables, their source view and triggers on
SQLite, the generated ``text_tsv`` column and the search indexes on PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    true,
)
from sqlalchemy import (
    text as sql_text,
)
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.expression import false

from gateway.store.columns import ID, BigId, Json, UTCDateTime
from gateway.store.columns import SchemaBase as Base


class SessionRow(Base):
    """One long-lived conversation; ``key`` names the chat, at most one current session per key."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    key: Mapped[str] = mapped_column(String(255), index=True)
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str] = mapped_column(String(128))
    thread_id: Mapped[str | None] = mapped_column(String(128))
    user_id: Mapped[str | None] = mapped_column(String(128))
    system_prompt: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_activity_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    end_reason: Mapped[str | None] = mapped_column(String(64))
    last_prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    last_prompt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    compaction_count: Mapped[int] = mapped_column(Integer, server_default=sql_text("0"))
    context_state: Mapped[dict[str, Any] | None] = mapped_column(Json)
    version: Mapped[int] = mapped_column(Integer)
    # Bumped with every change to the active set (migration 0008): keys the in-memory views.
    view_version: Mapped[int] = mapped_column(Integer, server_default=sql_text("0"))
    # What the chat's `overrides:` entry set when the session began, frozen (migration 0009).
    chat_overrides: Mapped[dict[str, Any] | None] = mapped_column(Json)
    # The chat whose ``delegate`` call ran this session as a sub-agent (migration 0017); NULL for chats.
    parent_session_id: Mapped[str | None] = mapped_column(String(32), index=True)

    __mapper_args__ = {"version_id_col": version}  # noqa: RUF012 (SQLAlchemy reads it once)
    __table_args__ = (
        Index(
            "uq_sessions_current_key",
            "key",
            unique=True,
            sqlite_where=sql_text("ended_at IS NULL"),
            postgresql_where=sql_text("ended_at IS NULL"),
        ),
    )


class CompactionRow(Base):
    """One compaction: what it archived, where its summary is, and how it went."""

    __tablename__ = "compactions"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    archived_from_seq: Mapped[int | None] = mapped_column(Integer)
    archived_to_seq: Mapped[int | None] = mapped_column(Integer)
    messages_archived: Mapped[int] = mapped_column(Integer)
    first_kept_id: Mapped[int | None] = mapped_column(BigId)
    summary_message_id: Mapped[int | None] = mapped_column(BigId)
    tokens_before: Mapped[int] = mapped_column(Integer)
    tokens_after: Mapped[int] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(String(128))
    duration_ms: Mapped[int] = mapped_column(Integer)
    focus: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    restored_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Which strategy of the context engine made it (prune, snip, summary, sliding, ...).
    strategy: Mapped[str] = mapped_column(String(32), server_default=sql_text("'summary'"))

    __table_args__ = (
        # ``number`` orders a session's compactions (timestamps can tie).
        UniqueConstraint("session_id", "number"),
        CheckConstraint(
            "\"trigger\" IN ('hygiene', 'in_loop', 'reactive', 'manual', 'scheduled')", name="trigger"
        ),
        CheckConstraint("status IN ('ok', 'fallback', 'failed')", name="status"),
    )


class MessageRow(Base):
    """One message; never deleted. The active view is ``active ORDER BY seq, sub_seq``."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    sub_seq: Mapped[int] = mapped_column(Integer, server_default=sql_text("0"))
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[list[dict[str, Any]] | None] = mapped_column(Json)
    """The content blocks; NULL when they are one plain text block, which ``text`` then holds
    (``gateway.store.convert.stored_content``)."""
    text: Mapped[str] = mapped_column(Text, server_default=sql_text("''"))
    kind: Mapped[str] = mapped_column(String(16), server_default=sql_text("'message'"))
    author_id: Mapped[str | None] = mapped_column(String(128))
    author_name: Mapped[str | None] = mapped_column(String(255))
    platform_message_id: Mapped[str | None] = mapped_column(String(128))
    token_estimate: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    active: Mapped[bool] = mapped_column(Boolean, server_default=true())
    compacted: Mapped[bool] = mapped_column(Boolean, server_default=false())
    compaction_id: Mapped[str | None] = mapped_column(ForeignKey("compactions.id"))
    produced_by: Mapped[str | None] = mapped_column(ForeignKey("compactions.id"))
    edited_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    original_content: Mapped[list[dict[str, Any]] | None] = mapped_column(Json)
    search_cjk: Mapped[str | None] = mapped_column(Text)
    """The CJK characters of ``text``, one token each, for search (``gateway.store.search_index``)."""

    __table_args__ = (
        UniqueConstraint("session_id", "seq", "sub_seq"),
        Index(
            "uq_messages_session_id_platform_message_id",
            "session_id",
            "platform_message_id",
            unique=True,
            sqlite_where=sql_text("platform_message_id IS NOT NULL"),
            postgresql_where=sql_text("platform_message_id IS NOT NULL"),
        ),
        Index("ix_messages_active_view", "session_id", "active", "seq", "sub_seq"),
        Index("ix_messages_compaction_id", "compaction_id"),
        Index("ix_messages_produced_by", "produced_by"),
        CheckConstraint("role IN ('user', 'assistant')", name="role"),
        CheckConstraint("kind IN ('message', 'summary', 'notice')", name="kind"),
    )


class UsageRow(Base):
    """Token usage and cost of one API call."""

    __tablename__ = "usage"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    model: Mapped[str] = mapped_column(String(128))
    purpose: Mapped[str] = mapped_column(String(16))
    input_tokens: Mapped[int] = mapped_column(Integer)
    cache_write_tokens: Mapped[int] = mapped_column(Integer)
    cache_read_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cost_usd: Mapped[float] = mapped_column(Float)
    estimated: Mapped[bool] = mapped_column(Boolean, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Cache diagnostics of a chat call (0018_cache_diagnostics): the API's miss reason, the
    # tokens it missed, and our own part in it.
    cache_miss_reason: Mapped[str | None] = mapped_column(String(32), index=True)
    cache_missed_tokens: Mapped[int | None] = mapped_column(Integer)
    cache_cause: Mapped[str | None] = mapped_column(String(16))
    cache_miss_ours: Mapped[bool | None] = mapped_column(Boolean)


class InboxRow(Base):
    """A received platform message, persisted before anything else happens to it."""

    __tablename__ = "inbox"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str] = mapped_column(String(128))
    platform_message_id: Mapped[str | None] = mapped_column(String(128))
    session_key: Mapped[str] = mapped_column(String(255))
    payload: Mapped[dict[str, Any]] = mapped_column(Json)
    addressed: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16), server_default=sql_text("'pending'"))
    attempts: Mapped[int] = mapped_column(Integer, server_default=sql_text("0"))
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    error: Mapped[str | None] = mapped_column(Text)
    message_id: Mapped[int | None] = mapped_column(BigId)

    __table_args__ = (
        UniqueConstraint("platform", "chat_id", "platform_message_id"),
        Index("ix_inbox_status_received_at", "status", "received_at"),
        Index("ix_inbox_session_key_status", "session_key", "status"),
        CheckConstraint("status IN ('pending', 'processing', 'done', 'failed', 'ignored')", name="status"),
    )


class OutboxRow(Base):
    """A reply waiting to be (or already) delivered."""

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    target: Mapped[dict[str, Any]] = mapped_column(Json)
    text: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), server_default=sql_text("'pending'"))
    attempts: Mapped[int] = mapped_column(Integer, server_default=sql_text("0"))
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    delivered_ids: Mapped[list[str] | None] = mapped_column(Json)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    message_id: Mapped[int | None] = mapped_column(BigId)
    inbox_ids: Mapped[list[int] | None] = mapped_column(Json)
    kind: Mapped[str] = mapped_column(String(16), server_default=sql_text("'reply'"))
    # A reply re-delivered after a takeover: the stream whose messages it edits rather than resends.
    stream_id: Mapped[int | None] = mapped_column(BigId)

    __table_args__ = (
        Index("ix_outbox_status_next_attempt_at", "status", "next_attempt_at"),
        CheckConstraint("status IN ('pending', 'sent', 'failed')", name="status"),
        CheckConstraint("kind IN ('reply', 'notice', 'failure_notice')", name="kind"),
    )


class MemoryRow(Base):
    """One file of the memory tool, per scope."""

    __tablename__ = "memories"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(255))
    path: Mapped[str] = mapped_column(String(1024))
    content: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (UniqueConstraint("scope", "path"),)


class AuditRow(Base):
    """Something an operator may want to know happened (admin commands, refusals)."""

    __tablename__ = "audit"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    event: Mapped[str] = mapped_column(String(64), index=True)
    platform: Mapped[str | None] = mapped_column(String(32))
    user_id: Mapped[str | None] = mapped_column(String(128))
    detail: Mapped[str] = mapped_column(Text, server_default=sql_text("''"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Admin actions (0006_admin): who did it, to which session, and what it changed.
    actor: Mapped[str | None] = mapped_column(String(255))
    session_id: Mapped[str | None] = mapped_column(String(32))
    counts: Mapped[dict[str, Any] | None] = mapped_column(Json)


class UsageDailyRow(Base):
    """Usage and cost per session and UTC day, kept with each call: what the admin's cost views read."""

    __tablename__ = "usage_daily"

    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    day: Mapped[str] = mapped_column(String(10), primary_key=True, index=True)
    calls: Mapped[int] = mapped_column(Integer)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    cost_usd: Mapped[float] = mapped_column(Float)


# Erasing a user's data finds their messages by author (0006_admin).
Index("ix_messages_author_id", MessageRow.author_id)


class StreamRow(Base):
    """A reply being shown while it is written (edited in place): what each platform message shows.

    Open while the turn runs; closed when the finished reply is recorded in the outbox (as sent,
    with these message ids) or when the stream is given up. An open row found on start is a
    stream a crash cut short: its last message is edited to say so.
    """

    __tablename__ = "streams"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    target: Mapped[dict[str, Any]] = mapped_column(Json)
    message_ids: Mapped[list[str] | None] = mapped_column(Json)
    shown: Mapped[list[str] | None] = mapped_column(Json)
    status: Mapped[str] = mapped_column(String(16), server_default=sql_text("'open'"))
    outbox_id: Mapped[int | None] = mapped_column(BigId)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The session lease (inbox claim) the stream was opened under: recovery waits for it to lapse.
    session_key: Mapped[str | None] = mapped_column(String(255))
    lease_owner: Mapped[str | None] = mapped_column(String(128))

    __table_args__ = (
        Index("ix_streams_status", "status"),
        Index("ix_streams_session_key_status", "session_key", "status"),
        CheckConstraint("status IN ('open', 'done', 'interrupted')", name="status"),
    )


sessions: Table = Base.metadata.tables["sessions"]
compactions: Table = Base.metadata.tables["compactions"]
messages: Table = Base.metadata.tables["messages"]
usage: Table = Base.metadata.tables["usage"]
inbox: Table = Base.metadata.tables["inbox"]
outbox: Table = Base.metadata.tables["outbox"]
memories: Table = Base.metadata.tables["memories"]
audit: Table = Base.metadata.tables["audit"]
usage_daily: Table = Base.metadata.tables["usage_daily"]


class LeaseRow(Base):
    """A named lease: at most one live owner per name (scheduled jobs, later leader election).

    ``generation`` grows by one each time the lease changes hands: a fencing token.
    """

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128))
    generation: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime)
    renewed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SchedulerJobRow(Base):
    """One scheduled job across the cluster: when it is next due and how its last run went."""

    __tablename__ = "scheduler_jobs"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    schedule: Mapped[str] = mapped_column(String(255), server_default=sql_text("''"))
    next_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status: Mapped[str | None] = mapped_column(String(16))
    last_owner: Mapped[str | None] = mapped_column(String(128))
    last_result: Mapped[dict[str, Any] | None] = mapped_column(Json)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_duration_ms: Mapped[int | None] = mapped_column(Integer)
    runs: Mapped[int] = mapped_column(Integer, server_default=sql_text("0"))
    failures: Mapped[int] = mapped_column(Integer, server_default=sql_text("0"))

    __table_args__ = (CheckConstraint("last_status IN ('running', 'ok', 'failed')", name="last_status"),)


class ScheduledTaskRow(Base):
    """A reminder or recurring task the agent set for one chat (``session_key``), and only that chat."""

    __tablename__ = "scheduled_tasks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    session_key: Mapped[str] = mapped_column(String(255))
    platform: Mapped[str] = mapped_column(String(32))
    chat_id: Mapped[str] = mapped_column(String(128))
    thread_id: Mapped[str | None] = mapped_column(String(128))
    session_id: Mapped[str | None] = mapped_column(String(32))
    prompt: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(8))
    spec: Mapped[str] = mapped_column(String(255))
    timezone: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), server_default=sql_text("'active'"))
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    runs: Mapped[int] = mapped_column(Integer, server_default=sql_text("0"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_scheduled_tasks_status_next_run_at", "status", "next_run_at"),
        Index("ix_scheduled_tasks_session_key_status", "session_key", "status"),
        CheckConstraint("kind IN ('at', 'cron', 'every')", name="kind"),
        CheckConstraint("status IN ('active', 'done', 'cancelled')", name="status"),
    )


class RateScopeRow(Base):
    """When the next send in one rate-limit scope may go (``telegram:global``, ``telegram:chat:42``),
    shared by every worker: seconds since the epoch on the database's clock. A 429's
    ``retry_after`` moves it forward, which pauses every sender to that scope."""

    __tablename__ = "rate_scopes"

    scope: Mapped[str] = mapped_column(String(160), primary_key=True)
    next_at: Mapped[float] = mapped_column(Float)


leases: Table = Base.metadata.tables["leases"]
rate_scopes: Table = Base.metadata.tables["rate_scopes"]
scheduler_jobs: Table = Base.metadata.tables["scheduler_jobs"]
scheduled_tasks: Table = Base.metadata.tables["scheduled_tasks"]
streams: Table = Base.metadata.tables["streams"]


class EngineFailureRow(Base):
    """A context engine that raised, timed out or planned something invalid; the built-in served."""

    __tablename__ = "engine_failures"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str | None] = mapped_column(String(32))
    engine: Mapped[str] = mapped_column(String(64))
    operation: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


engine_failures: Table = Base.metadata.tables["engine_failures"]


class StrategyRunRow(Base):
    """A strategy run that made no compaction row: each call the API's tool-result clearing
    cleared (``applied_edits``), counted with the compactions by ``/metrics`` and ``/context``."""

    __tablename__ = "strategy_runs"
    __table_args__ = (Index("ix_strategy_runs_session_id", "session_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(32))
    strategy: Mapped[str] = mapped_column(String(32))
    tokens_freed: Mapped[int] = mapped_column(Integer)
    detail: Mapped[dict[str, Any] | None] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


strategy_runs: Table = Base.metadata.tables["strategy_runs"]


class ToolCallRow(Base):
    """One call of an MCP server's tool: for the admin page and ``/metrics`` (never its output)."""

    __tablename__ = "tool_calls"
    __table_args__ = (Index("ix_tool_calls_session_id", "session_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(32))
    server: Mapped[str] = mapped_column(String(64))
    tool: Mapped[str] = mapped_column(String(128))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    duration_ms: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    output_chars: Mapped[int] = mapped_column(Integer)


tool_calls: Table = Base.metadata.tables["tool_calls"]


class AdminOverrideRow(Base):
    """A per-chat override an admin set on the admin page (beside the config's ``overrides:``).

    ``thread`` is ``""`` for the whole chat (a key column cannot be NULL); a session starting in
    the chat freezes what applies, as it does with the config's entries.
    """

    __tablename__ = "admin_overrides"

    platform: Mapped[str] = mapped_column(String(64), primary_key=True)
    chat: Mapped[str] = mapped_column(String(128), primary_key=True)
    thread: Mapped[str] = mapped_column(String(128), primary_key=True)
    system_prompt: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(128))
    summary_model: Mapped[str | None] = mapped_column(String(128))
    budget_tokens: Mapped[int | None] = mapped_column(Integer)
    tools: Mapped[dict[str, Any] | None] = mapped_column(Json)  # {include: [globs], exclude: [globs]}
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_by: Mapped[str] = mapped_column(String(255))


admin_overrides: Table = Base.metadata.tables["admin_overrides"]


# Tables of their own modules, imported here so that the one metadata (migrations, `alembic check`) has them.
from gateway.store.api_models import ApiResponseRow as ApiResponseRow  # noqa: E402
