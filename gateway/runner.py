"""Wires adapters -> gateway -> agent, and runs the service until a signal (or the end of piped input).

:class:`Service` builds and owns the parts (database, provider, engine, tools, loop,
delivery, gateway, scheduler, adapters) with an explicit start/stop; :func:`run_service`
is what ``hygieia run`` calls. On SIGINT/SIGTERM it stops serving new turns, lets the
running ones finish for ``sessions.turn_grace_seconds``, sends what is ready, and returns 0;
anything unfinished stays in the inbox and is served on the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import make_url

from agent.compressor import ContextCompressor
from agent.errors import ConfigError
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.offline import OfflineProvider
from agent.provider import LLMProvider
from agent.tokens import estimate_text_tokens, model_info
from agent.tools import ToolRegistry, default_registry
from agent.tools.schedule import ScheduleTool
from gateway.cluster.election import ClusterState, IntakeSlot
from gateway.cluster.roles import Role, check_role, intake_lease, runs_intake, runs_worker
from gateway.cluster.routes import SendRoutes
from gateway.cluster.runtime import ClusterRuntime
from gateway.commands import command_specs
from gateway.config import Settings
from gateway.delivery import Delivery
from gateway.dispatch import Gateway, default_worker_id
from gateway.job_setup import JobParts, build_jobs, task_book
from gateway.jobs import ClusterJobs
from gateway.platforms.base import PlatformAdapter
from gateway.platforms.console import ConsoleAdapter
from gateway.platforms.discord import DiscordAdapter
from gateway.platforms.telegram import TelegramAdapter
from gateway.sessions import SessionDirectory
from gateway.shard_claims import ShardClaimer
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

SQLITE_LEASE_SECONDS = 30.0
POSTGRES_LEASE_SECONDS = 300.0
OFFLINE_BANNER = (
    "OFFLINE MODE: no ANTHROPIC_API_KEY is set, so answers come from the local offline provider, "
    "not a model. Set ANTHROPIC_API_KEY to talk to Claude."
)


def build_provider(settings: Settings) -> LLMProvider:
    """The Anthropic provider when a key is configured, else the offline one (announced by the caller)."""
    if settings.offline or settings.anthropic_api_key is None:
        return OfflineProvider()
    return AnthropicProvider(
        api_key=settings.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic_base_url,
        settings=settings.llm,
    )


def build_adapters(settings: Settings, platforms: Sequence[str] | None) -> list[PlatformAdapter]:
    """Adapters for ``platforms``; without a list, every platform whose token is set, else the console.

    Asking for a platform whose token is not set is a configuration error, not a silent skip.
    """
    wanted = list(platforms) if platforms else []
    if not wanted:
        if settings.telegram_bot_token is not None:
            wanted.append("telegram")
        if settings.discord_bot_token is not None:
            wanted.append("discord")
        if not wanted:
            wanted.append("console")
    adapters: list[PlatformAdapter] = []
    for name in dict.fromkeys(wanted):
        if name == "console":
            adapters.append(ConsoleAdapter())
        elif name == "telegram":
            if settings.telegram_bot_token is None:
                raise ConfigError("TELEGRAM_BOT_TOKEN: not set, but --platform telegram was asked for")
            adapters.append(
                TelegramAdapter(
                    settings.telegram_bot_token.get_secret_value(),
                    base_url=settings.telegram_base_url,
                    settings=settings.telegram,
                )
            )
        elif name == "discord":
            if settings.discord_bot_token is None:
                raise ConfigError("DISCORD_BOT_TOKEN: not set, but --platform discord was asked for")
            adapters.append(
                DiscordAdapter(
                    settings.discord_bot_token.get_secret_value(),
                    api_base=settings.discord_api_base,
                    gateway_url=settings.discord_gateway_url,
                    settings=settings.discord,
                    commands=command_specs(),
                )
            )
        else:
            raise ConfigError(f"--platform: unknown platform {name!r}; choose console, telegram or discord")
    return adapters


def chats_on_this_terminal(settings: Settings, platforms: Sequence[str] | None, stdin: Any = None) -> bool:
    """True when the console will run as an interactive chat (a person types on this terminal)."""
    stream = stdin if stdin is not None else sys.stdin
    if not (hasattr(stream, "isatty") and stream.isatty()):
        return False
    if platforms:
        return "console" in platforms
    return settings.telegram_bot_token is None and settings.discord_bot_token is None


def context_window_for(settings: Settings, model: str) -> int:
    """The window of ``model``; ``HYGIEIA_CONTEXT_WINDOW`` overrides the main model's."""
    override = settings.context_window if model == settings.model else None
    return model_info(
        model, context_window_override=override, prices=settings.model_prices or None
    ).context_window


def default_lease(db: Database) -> float:
    """How long a claimed inbox item stays with its worker before another may take it.

    SQLite serves one process, so the lease only guards against a second process started by
    mistake and a short one lets a crashed service answer soon after its restart. Across
    PostgreSQL workers it must outlast a long turn (tool rounds, retries).
    """
    return SQLITE_LEASE_SECONDS if db.dialect == "sqlite" else POSTGRES_LEASE_SECONDS


def intake_slots(adapters: Sequence[PlatformAdapter]) -> list[IntakeSlot]:
    """One elected intake per platform that can send on its own (Telegram, Discord); the leader
    (re)starts the given adapter (adapters are restartable after ``stop``).

    The hook for Discord sharding: a slot is a lease name plus a builder, so one slot per shard
    group (lease ``intake:discord:<ids>``, building a DiscordAdapter with those shard ids) lets
    each group be led by a different process.
    """

    def same(adapter: PlatformAdapter) -> Callable[[], PlatformAdapter]:
        return lambda: adapter

    return [IntakeSlot(intake_lease(a.name), a.name, same(a)) for a in adapters if a.sends_alone]


def dialect_of(settings: Settings) -> str:
    """``sqlite`` or ``postgresql`` (the backend of the configured URL), before connecting."""
    return make_url(settings.resolved_database_url).get_backend_name()


def tool_tokens(tools: ToolRegistry) -> int:
    definitions = tools.definitions()
    return estimate_text_tokens(json.dumps(definitions, ensure_ascii=False)) if definitions else 0


@dataclass
class Service:
    """Every part of a running Hygieia, built by :meth:`build`; ``start`` then ``stop``."""

    settings: Settings
    db: Database
    store: Store
    provider: LLMProvider
    engine: ContextCompressor
    agent: AgentLoop
    delivery: Delivery
    gateway: Gateway
    scheduler: ClusterJobs
    adapters: list[PlatformAdapter]
    role: Role = "all"
    cluster: ClusterRuntime | None = None
    """Set on PostgreSQL: elected intakes, send-only adapters, heartbeat (gateway.cluster)."""
    shard_claims: ShardClaimer | None = None
    """Set by :meth:`start` with ``discord.shard_ids: auto``: the shards this node claimed."""

    @classmethod
    async def build(
        cls,
        settings: Settings,
        adapters: list[PlatformAdapter],
        *,
        provider: LLMProvider | None = None,
        migrate: bool = True,
        lease_seconds: float | None = None,
        role: str = "all",
    ) -> Service:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        url = settings.resolved_database_url
        checked = check_role(role, dialect_of(settings))
        if migrate:
            await upgrade_to_head(url)
        db = Database(url)
        await db.connect()
        store = Store(db)
        worker_id = default_worker_id()
        clustered = db.dialect == "postgresql"
        # On PostgreSQL an intake that must be unique (a poller, a gateway connection) is elected,
        # one per cluster; a shared one (Telegram webhooks) and the console run on every intake node.
        # Workers send through send-only twins of the platform adapters.
        remote = [a for a in adapters if clustered and a.sends_alone]
        elected = [a for a in remote if not a.shared_intake]
        local = [a for a in adapters if a not in elected]
        if clustered and not runs_intake(checked):
            local = []
        senders = {a.name: a.twin() for a in remote} if runs_worker(checked) else {}
        state = ClusterState(checked, worker_id, clustered)
        cell: list[ClusterRuntime] = []
        routes: Mapping[str, PlatformAdapter] = {a.name: a for a in adapters}
        if clustered:
            routes = SendRoutes(
                {**senders, **{a.name: a for a in local}},
                lambda platform: cell[0].intake(platform) if cell else None,
                [a.name for a in adapters],
            )
        provider = provider if provider is not None else build_provider(settings)
        prices = settings.model_prices or None
        engine = ContextCompressor(
            settings.compression, provider, summary_model=settings.summary_model, prices=prices
        )
        tools = default_registry()
        tasks = task_book(settings, store)
        if tasks is not None:
            tools.register(ScheduleTool(tasks))
        agent = AgentLoop(
            provider,
            store,
            engine,
            llm=settings.llm,
            caching=settings.prompt_caching,
            tools=tools,
            prices=prices,
        )
        delivery = Delivery(
            store,
            routes,
            owner=worker_id if clustered else None,
            lease_seconds=settings.cluster.outbox_lease_seconds,
            max_attempts=settings.delivery.outbox_max_attempts,
            base_delay=settings.delivery.retry_base_seconds,
            max_delay=settings.delivery.retry_max_seconds,
            max_parts=settings.delivery.max_reply_parts,
        )
        directory = SessionDirectory(
            store,
            settings.sessions,
            model=settings.model,
            context_window=lambda model: context_window_for(settings, model),
            timezone=settings.timezone,
        )
        gateway = Gateway(
            settings=settings,
            store=store,
            agent=agent,
            engine=engine,
            delivery=delivery,
            directory=directory,
            tools=tools.definitions(),
            tool_tokens=tool_tokens(tools),
            lease_seconds=lease_seconds or settings.cluster.session_lease_seconds or default_lease(db),
            tasks=tasks,
            worker_id=worker_id,
        )
        parts = JobParts(store, gateway, engine, directory, tools.definitions, tasks)
        scheduler = build_jobs(settings, parts)
        cluster = None
        if clustered:
            cluster = ClusterRuntime(
                store,
                settings.cluster,
                state,
                senders=senders,
                slots=intake_slots(elected) if runs_intake(checked) else [],
                handler=lambda message: gateway.intake(message),  # looked up late, as start() does
                poll_inbox=gateway.poll_inbox,
            )
            cell.append(cluster)
        return cls(
            settings,
            db,
            store,
            provider,
            engine,
            agent,
            delivery,
            gateway,
            scheduler,
            local,
            checked,
            cluster,
        )

    async def start(self) -> None:
        worker = runs_worker(self.role)
        if self.cluster is not None:
            await self.cluster.start_senders()
        if worker:
            await self.delivery.start()
            await self.gateway.start()
        for adapter in self.adapters:
            await adapter.start(self.gateway.intake)
            if isinstance(adapter, DiscordAdapter) and adapter.auto_shards:
                # discord.shard_ids: auto: the shards this node serves are claimed through the database.
                self.shard_claims = ShardClaimer(
                    self.store,
                    adapter,
                    shard_count=self.settings.discord.shard_count,
                    ttl_seconds=self.settings.discord.shard_lease_seconds,
                )
                await self.shard_claims.start()
        if worker:
            await self.gateway.streams.recover()
            await self.scheduler.start()
        if self.cluster is not None:
            await self.cluster.start()
        _log.info(
            "hygieia is running",
            extra={
                "platforms": [a.name for a in self.adapters],
                "provider": self.provider.name,
                "role": self.role,
                "intake": "elected" if self.cluster is not None and runs_intake(self.role) else "local",
            },
        )

    async def stop(self) -> None:
        """Stop serving, let running turns finish (grace), send what is ready, disconnect, close."""
        if self.cluster is not None:
            await self.cluster.stop_intake()  # first: a standby takes the intake over at once
        await self.scheduler.stop()  # first: no job may start on a gateway that is stopping
        await self.gateway.stop(self.settings.sessions.turn_grace_seconds)
        await self.delivery.stop()
        if self.shard_claims is not None:
            await self.shard_claims.stop()  # disconnects the shards, then releases their claims
        for adapter in self.adapters:
            try:
                await adapter.stop()
            except Exception:  # one adapter failing to stop must not keep the others open
                _log.exception("stopping the %s adapter failed", adapter.name)
        if self.cluster is not None:
            await self.cluster.stop()
        await self.provider.aclose()
        await self.db.dispose()
        _log.info("hygieia stopped")


async def run_service(
    settings: Settings,
    platforms: list[str] | None,
    *,
    lease_seconds: float | None = None,
    role: str = "all",
) -> int:
    """``hygieia run``: serve until SIGINT/SIGTERM, or until piped console input is used up; exit code."""
    check_role(role, dialect_of(settings))  # before anything connects: one clear line
    adapters = build_adapters(settings, platforms)
    service = await Service.build(settings, adapters, lease_seconds=lease_seconds, role=role)
    console = next((a for a in adapters if isinstance(a, ConsoleAdapter)), None)
    if service.provider.name == "offline":
        # On the chat terminal the console shows the banner itself: the log line goes to the file.
        chatting = console is not None and console.interactive
        _log.log(logging.INFO if chatting else logging.WARNING, OFFLINE_BANNER)
        if console is not None:
            console.announce(OFFLINE_BANNER)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, _on_signal, stop, sig)
            installed.append(sig)
    try:
        await service.start()
        tune_gc()
        waiters = [asyncio.create_task(stop.wait())]
        if console is not None:
            waiters.append(asyncio.create_task(console.finished.wait()))
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
        if not stop.is_set():
            # Input ended: finish what a previous run left (recovered messages) before leaving.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(service.gateway.wait_idle(), settings.sessions.turn_grace_seconds)
            await service.delivery.flush()
    finally:
        await service.stop()
        for sig in installed:
            loop.remove_signal_handler(sig)
    return 0


GC_THRESHOLDS = (50_000, 20, 100)
"""Young collections every 50,000 allocations instead of 700, and full ones a tenth as often:
a turn allocates thousands of short-lived objects, and with the defaults the collector walked
every live object (the cached active views included) often enough to set the p99 of a turn
(issue 10; ``bench/gateway_overhead.py --gc`` measures both)."""


def tune_gc() -> None:
    """After start-up: move everything allocated so far (modules, the service's objects) out of
    the collector's sight (``gc.freeze()``: they live as long as the process), and collect less
    often. Reference cycles are still collected, only in bigger batches."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    _log.info("%s received: finishing running turns, then stopping", sig.name)
    stop.set()
