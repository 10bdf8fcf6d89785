"""The Service: every part of a running Hygieia, built in one place, started and stopped in order.

:meth:`Service.build` builds the parts (database, provider, engine, tools, loop, delivery,
gateway, scheduler, adapters) and hands each its collaborators; ``start`` and ``stop`` (or
``async with``) run them. Each build step is a function of its own below, in the order they run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.context_engine import ContextEngine
from agent.loop import AgentLoop
from agent.provider import LLMProvider
from agent.tools import ToolRegistry, default_registry
from agent.tools.deferral import ToolDeferral
from agent.tools.delegate import DelegateTool, DelegationLimits, SubAgentParts
from agent.tools.schedule import ScheduleTool
from gateway.cluster.election import ClusterState
from gateway.cluster.roles import Role, check_role, runs_intake, runs_worker
from gateway.cluster.routes import SendRoutes
from gateway.cluster.runtime import ClusterRuntime
from gateway.cluster.shard_claims import ShardClaimer
from gateway.config import Settings
from gateway.jobs.setup import JobParts, build_jobs, task_book
from gateway.outbound.delivery import Delivery
from gateway.platforms.base import PlatformAdapter
from gateway.platforms.discord_bot.adapter import DiscordAdapter
from gateway.platforms.http_api.adapter import ApiAdapter
from gateway.runner.adapters import intake_slots
from gateway.runner.gateway_parts import build_gateway, default_lease, default_outbox_lease, dialect_of
from gateway.runner.models import budget_for, build_context_engine, build_provider, context_window_for
from gateway.runner.tool_servers import build_catalog
from gateway.scheduling.runs import ClusterJobs
from gateway.scheduling.tasks import TaskBook
from gateway.serving.dispatch import Gateway, default_worker_id
from gateway.serving.sessions import SessionDirectory
from gateway.serving.tool_view import ToolView
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store

if TYPE_CHECKING:
    from agent.tools.mcp_servers import McpCatalog

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlatformPlan:
    """Which adapter runs where. On PostgreSQL an intake that must be unique (a poller, a gateway
    connection) is elected, one per cluster; a shared one (Telegram webhooks) and the console run
    on every intake node; workers send through send-only twins of the platform adapters."""

    local: list[PlatformAdapter]
    """Started by this process, with their intake."""
    elected: list[PlatformAdapter]
    """Started only while this node leads their intake (gateway.cluster.election)."""
    senders: dict[str, PlatformAdapter]
    """Send-only twins, by platform name."""


def plan_platforms(adapters: Sequence[PlatformAdapter], role: Role, *, clustered: bool) -> PlatformPlan:
    remote = [a for a in adapters if clustered and a.sends_alone]
    elected = [a for a in remote if not a.shared_intake]
    local = [a for a in adapters if a not in elected]
    if clustered and not runs_intake(role):
        local = []
    senders = {a.name: a.twin() for a in remote} if runs_worker(role) else {}
    return PlatformPlan(local, elected, senders)


class ElectedIntakes:
    """The forward reference from delivery's routes to the cluster runtime, built after them: a
    reply to a platform whose intake this node leads goes out through that intake's adapter.
    Two phases: routes hold this object from the start, :meth:`bind` gives it the runtime."""

    def __init__(self) -> None:
        self._cluster: ClusterRuntime | None = None

    def bind(self, cluster: ClusterRuntime) -> None:
        self._cluster = cluster

    def __call__(self, platform: str) -> PlatformAdapter | None:
        return None if self._cluster is None else self._cluster.intake(platform)


async def open_database(settings: Settings, db: Database, *, migrate: bool) -> None:
    """Connect ``db``, upgraded to head first unless told not to."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if migrate:
        await upgrade_to_head(settings.resolved_database_url)
    await db.connect()


def build_tools(
    settings: Settings, store: Store, engine: ContextEngine
) -> tuple[ToolRegistry, TaskBook | None]:
    """The agent's tools: the defaults, the engine's own, and ``schedule`` when tasks are on."""
    tools = default_registry()
    tools.deferral = ToolDeferral(settings.llm.defer_tools_above_tokens, settings.llm.tool_search)
    for tool in engine.tools():
        tools.register(tool)
    tasks = task_book(settings, store)
    if tasks is not None:
        tools.register(ScheduleTool(tasks))
    return tools, tasks


def build_agent(
    settings: Settings, provider: LLMProvider, store: Store, engine: ContextEngine, tools: ToolRegistry
) -> AgentLoop:
    """The chat loop; with ``delegation.enabled``, ``delegate`` joins its tools, its sub-agents
    made of the same parts."""
    if settings.delegation.enabled:
        parts = SubAgentParts(
            provider,
            engine,
            tools,
            settings.llm,
            settings.prompt_caching,
            prices=settings.model_prices or None,
            models=settings.models or None,
        )
        tools.register(DelegateTool(parts, delegation_limits(settings)))
    return AgentLoop(
        provider,
        store,
        engine,
        llm=settings.llm,
        caching=settings.prompt_caching,
        tools=tools,
        prices=settings.model_prices or None,
        models=settings.models or None,
    )


def delegation_limits(settings: Settings) -> DelegationLimits:
    d = settings.delegation
    return DelegationLimits(d.max_turns, d.max_tokens, d.timeout_seconds, d.model)


def build_delivery(
    settings: Settings,
    db: Database,
    store: Store,
    routes: Mapping[str, PlatformAdapter],
    *,
    owner: str | None,
) -> Delivery:
    """The outbox worker; ``owner`` (several workers deliver) claims replies chat by chat."""
    return Delivery(
        store,
        routes,
        owner=owner,
        lease_seconds=settings.cluster.outbox_lease_seconds or default_outbox_lease(db),
        max_attempts=settings.delivery.outbox_max_attempts,
        base_delay=settings.delivery.retry_base_seconds,
        max_delay=settings.delivery.retry_max_seconds,
        max_parts=settings.delivery.max_reply_parts,
    )


def build_directory(settings: Settings, store: Store) -> SessionDirectory:
    return SessionDirectory(
        store,
        settings.sessions,
        model=settings.model,
        context_window=lambda model: context_window_for(settings, model),
        budget=lambda model: budget_for(settings, model),
        timezone=settings.timezone,
        overrides=settings.overrides,
    )


def build_cluster(
    settings: Settings,
    store: Store,
    role: Role,
    worker_id: str,
    plan: PlatformPlan,
    gateway: Gateway,
    delivery: Delivery,
) -> ClusterRuntime:
    """Elected intakes, send-only adapters and the heartbeat (PostgreSQL only)."""
    return ClusterRuntime(
        store,
        settings.cluster,
        ClusterState(role, worker_id, True),
        senders=plan.senders,
        slots=intake_slots(plan.elected) if runs_intake(role) else [],
        handler=lambda message: gateway.intake(message),  # looked up late, as start() does
        poll_inbox=gateway.poll_inbox,
        wake=gateway.wake if settings.cluster.notify else None,
        deliver_now=delivery.notify,
        cancel_turn=gateway.cancel_turn,
    )


@dataclass
class Service:
    """Every part of a running Hygieia, built by :meth:`build`; ``start`` then ``stop``."""

    settings: Settings
    db: Database
    store: Store
    provider: LLMProvider
    engine: ContextEngine
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
    tool_servers: McpCatalog | None = None
    """The MCP servers of ``mcp_servers:`` (connected first at start, closed last at stop)."""

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
        checked = check_role(role, dialect_of(settings))
        # The engine (a plugin's import and factory included) is built before the database is
        # opened or migrated: one that cannot be built stops the start with nothing touched. The
        # store it is handed is not connected yet; it is used only once the service runs.
        db = Database(settings.resolved_database_url)
        store = Store(db)
        provider = provider if provider is not None else build_provider(settings)
        engine = build_context_engine(settings, provider, sink=store.record_engine_failure, store=store)
        await open_database(settings, db, migrate=migrate)
        worker_id = default_worker_id()
        clustered = db.dialect == "postgresql"
        if clustered and settings.cluster.shared_rate_limits:
            for adapter in adapters:  # before the twins, which share it too
                adapter.share_rate_limits(store)
        for adapter in adapters:
            if isinstance(adapter, ApiAdapter):
                adapter.keep_responses(store)
        plan = plan_platforms(adapters, checked, clustered=clustered)
        intakes = ElectedIntakes()
        routes: Mapping[str, PlatformAdapter] = {a.name: a for a in adapters}
        if clustered:
            own = {**plan.senders, **{a.name: a for a in plan.local}}
            routes = SendRoutes(own, intakes, [a.name for a in adapters])
        tools, tasks = build_tools(settings, store, engine)
        tool_servers = (
            build_catalog(settings, os.environ, store.record_tool_call) if runs_worker(checked) else None
        )
        if tool_servers is not None:
            tools.add_source(tool_servers)
        agent = build_agent(settings, provider, store, engine, tools)
        delivery = build_delivery(settings, db, store, routes, owner=worker_id if clustered else None)
        directory = build_directory(settings, store)
        gateway = build_gateway(
            settings=settings,
            store=store,
            agent=agent,
            engine=engine,
            delivery=delivery,
            directory=directory,
            tools=tools,
            lease_seconds=lease_seconds or settings.cluster.session_lease_seconds or default_lease(db),
            tasks=tasks,
            worker_id=worker_id,
            tool_view=ToolView(tools, tool_servers),
        )
        scheduler = build_jobs(
            settings, JobParts(store, gateway, engine, directory, tools.definitions, tasks)
        )
        cluster = None
        if clustered:
            cluster = build_cluster(settings, store, checked, worker_id, plan, gateway, delivery)
            intakes.bind(cluster)
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
            plan.local,
            checked,
            cluster,
            tool_servers=tool_servers,
        )

    async def __aenter__(self) -> Service:
        """Start every part; when starting fails half-way, stop what started before re-raising."""
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        worker = runs_worker(self.role)
        if self.tool_servers is not None:
            await self.tool_servers.start()  # a server that fails is left down (and retried)
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
            await self.gateway.streams.recover(self.gateway.worker_id)
            await self.scheduler.start()
        if self.cluster is not None:
            await self.cluster.start()
        await self._log_kept_models()
        _log.info(
            "hygieia is running",
            extra={
                "platforms": [a.name for a in self.adapters],
                "provider": self.provider.name,
                "role": self.role,
                "intake": "elected" if self.cluster is not None and runs_intake(self.role) else "local",
            },
        )

    async def _log_kept_models(self) -> None:
        """Say that live conversations keep the model they started with: a changed HYGIEIA_MODEL
        reaches a chat only from its next session (/new)."""
        model = self.settings.model
        others = {m: n for m, n in (await self.store.live_models()).items() if m != model}
        if not others:
            return
        count = sum(others.values())
        _log.info(
            "model %s is for new conversations; %d live conversation(s) keep the model they started "
            "with until /new: %s",
            model,
            count,
            ", ".join(f"{m} ({n})" for m, n in sorted(others.items(), key=lambda kv: -kv[1])),
            extra={"model": model},
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
        if self.tool_servers is not None:
            await self.tool_servers.stop()
        await self.provider.aclose()
        await self.db.dispose()
        _log.info("hygieia stopped")
