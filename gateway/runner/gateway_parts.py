"""The serving side: the Gateway and every part it serves with, and the lease lengths it runs on."""

from __future__ import annotations

import json

from sqlalchemy.engine import make_url

from agent.clock import Clock, utcnow
from agent.context_engine import ContextEngine
from agent.loop import AgentLoop
from agent.tokens import estimate_text_tokens
from agent.tools import ToolRegistry
from gateway.config import Settings
from gateway.outbound.delivery import Delivery
from gateway.outbound.replies import Replies
from gateway.outbound.streaming import Streams
from gateway.platforms.manners import BotManners
from gateway.scheduling.tasks import TaskBook
from gateway.serving.auth import Authorizer
from gateway.serving.dead_letters import InboxFailures
from gateway.serving.dispatch import Gateway, ServingParts, default_worker_id
from gateway.serving.media_loader import MediaLoader
from gateway.serving.retry import RetryPolicy
from gateway.serving.sessions import SessionDirectory, SessionLocks
from gateway.serving.tool_view import ToolView
from gateway.serving.transcription import build_transcriber
from gateway.serving.turns import TurnBook, TurnServer
from gateway.store.db import Database
from gateway.store.repository import Store

SQLITE_LEASE_SECONDS = 30.0
POSTGRES_LEASE_SECONDS = 9.0
SQLITE_OUTBOX_LEASE_SECONDS = 120.0


def default_lease(db: Database) -> float:
    """How long a claimed inbox item stays with its worker before another may take it.

    SQLite serves one process, so the lease only guards against a second process started by
    mistake and a short one lets a crashed service answer soon after its restart. Across
    PostgreSQL workers it is short, so a dead worker's chats move on quickly: a long turn keeps it
    by renewing it, and a worker that lost it writes nothing (``gateway.store.fence``).
    """
    return SQLITE_LEASE_SECONDS if db.dialect == "sqlite" else POSTGRES_LEASE_SECONDS


def default_outbox_lease(db: Database) -> float:
    """How long a delivery round owns its chats' replies unrenewed. Across PostgreSQL workers it is
    short (a dead worker's replies go out soon) and renewed while the round sends; on SQLite the
    one process keeps the long lease it always had."""
    return SQLITE_OUTBOX_LEASE_SECONDS if db.dialect == "sqlite" else POSTGRES_LEASE_SECONDS


def dialect_of(settings: Settings) -> str:
    """``sqlite`` or ``postgresql`` (the backend of the configured URL), before connecting."""
    return make_url(settings.resolved_database_url).get_backend_name()


def tool_tokens(tools: ToolRegistry) -> int:
    definitions = tools.definitions()
    return estimate_text_tokens(json.dumps(definitions, ensure_ascii=False)) if definitions else 0


def build_gateway(
    *,
    settings: Settings,
    store: Store,
    agent: AgentLoop,
    engine: ContextEngine,
    delivery: Delivery,
    directory: SessionDirectory,
    tools: ToolRegistry,
    lease_seconds: float,
    worker_id: str | None = None,
    retry: RetryPolicy | None = None,
    tasks: TaskBook | None = None,
    clock: Clock = utcnow,
    tool_view: ToolView | None = None,
) -> Gateway:
    """The gateway and every part it serves with, each handed its collaborators (nothing is built
    inside the gateway)."""
    worker = worker_id or default_worker_id()
    policy = retry or RetryPolicy()
    replies = Replies(store, delivery)
    streams = Streams(store, delivery.adapter, settings.delivery)
    media = MediaLoader(store, delivery.adapter, settings.media, transcriber=build_transcriber(settings))
    book = TurnBook()
    failures = InboxFailures(
        store,
        replies,
        worker_id=worker,
        max_attempts=settings.delivery.inbox_max_attempts,
        retry=policy,
        clock=clock,
    )
    definitions = tools.definitions()
    turn = TurnServer(
        settings=settings,
        store=store,
        agent=agent,
        engine=engine,
        replies=replies,
        streams=streams,
        media=media,
        directory=directory,
        tools=definitions,
        retry=policy,
        clock=clock,
        book=book,
    )
    parts = ServingParts(
        replies=replies,
        streams=streams,
        media=media,
        auth=Authorizer(settings),
        locks=SessionLocks(),
        failures=failures,
        book=book,
        turn=turn,
        retry=policy,
        manners=BotManners(
            answer_bots=settings.sessions.answer_bots,
            max_consecutive=settings.sessions.max_consecutive_bot_replies,
        ),
    )
    return Gateway(
        settings=settings,
        store=store,
        engine=engine,
        delivery=delivery,
        directory=directory,
        parts=parts,
        worker_id=worker,
        tools=definitions,
        tool_tokens=tool_tokens(tools),
        tool_view=tool_view or ToolView(tools),
        lease_seconds=lease_seconds,
        clock=clock,
        tasks=tasks,
    )
