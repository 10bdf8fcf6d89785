"""``hygieia doctor``: check the setup and say plainly what is wrong."""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from typing import Annotated, Literal
from urllib.parse import urlsplit

import typer
from rich.table import Table
from sqlalchemy.exc import SQLAlchemyError

from agent.clock import Clock, utcnow
from agent.errors import ConfigError, StoreError
from gateway.cli.common import out, print_json, run_async, safe_url, settings_or_exit
from gateway.config import Settings
from gateway.config.webhooks import missing_secrets
from gateway.jobs.retention import retention_policy
from gateway.store.db import Database
from gateway.store.migrate import current_revision, head_revision
from gateway.store.repository import Store

Status = Literal["ok", "warn", "fail"]
TELEGRAM_TOKEN = re.compile(r"^\d{3,}:[A-Za-z0-9_-]{30,}$")
CHECK_TIMEOUT = 5.0
MAX_CLOCK_OFFSET_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the doctor's report."""

    name: str
    status: Status
    detail: str


def doctor_command(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    offline: Annotated[bool, typer.Option("--offline", help="Do not contact any endpoint.")] = False,
) -> None:
    """Check config, database, tokens and endpoints; exit 1 when something must be fixed."""
    settings = settings_or_exit()
    checks = run_async(lambda: run_checks(settings, contact_endpoints=not offline))
    if as_json:
        print_json([asdict(c) for c in checks])
    else:
        table = Table(title="hygieia doctor")
        table.add_column("check")
        table.add_column("status")
        table.add_column("detail")
        colour = {"ok": "green", "warn": "yellow", "fail": "red"}
        for c in checks:
            table.add_row(c.name, f"[{colour[c.status]}]{c.status}[/]", c.detail)
        out.print(table)
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(1)


async def run_checks(settings: Settings, *, contact_endpoints: bool) -> list[Check]:
    """Every check, in the order an operator would fix them."""
    checks = [Check("configuration", "ok", "loaded"), _check_data_dir(settings)]
    checks.append(await _check_database(settings))
    clock = await check_clock(settings.resolved_database_url)
    if clock is not None:
        checks.append(clock)
    checks.append(await _check_anthropic(settings, contact_endpoints))
    checks.append(_check_models(settings))
    checks.append(_check_budget(settings))
    checks.append(await _check_telegram(settings, contact_endpoints))
    checks.append(await _check_discord(settings, contact_endpoints))
    checks.extend(_check_access(settings))
    checks.extend(await _check_mcp_servers(settings, contact_endpoints))
    checks.extend(_check_api(settings))
    checks.extend(_check_webhooks(settings))
    checks.append(_check_context_engine(settings))
    checks.append(_check_caching(settings))
    checks.append(Check("retention", "ok", retention_policy(settings)))
    return checks


def _check_api(settings: Settings) -> list[Check]:
    """``HYGIEIA_API_KEYS`` parses into strong keys (the start refuses what this fails)."""
    if settings.api_keys is None:
        return []
    from gateway.platforms.http_api.keys import ApiKeys

    try:
        keys = ApiKeys.parse(settings.api_keys.get_secret_value())
    except ConfigError as exc:
        return [Check("api", "fail", str(exc))]
    where = f"http://{settings.api.host}:{settings.api.port}/v1"
    return [Check("api", "ok", f"{len(keys.names)} key(s) ({', '.join(keys.names)}) at {where}")]


def _check_webhooks(settings: Settings) -> list[Check]:
    """Each route's secret is in the environment, and its chat's platform has its token."""
    routes = settings.webhooks.routes
    if not routes:
        return []
    problems = missing_secrets(settings.webhooks, os.environ)
    tokens = {"telegram": settings.telegram_bot_token, "discord": settings.discord_bot_token}
    problems += [
        f"webhooks.routes.{name}.deliver_to: {route.deliver_to}, but the {route.platform} token is not set"
        for name, route in routes.items()
        if tokens[route.platform] is None
    ]
    if problems:
        return [Check("webhooks", "fail", "; ".join(problems))]
    where = f"http://{settings.api.host}:{settings.api.port}/hooks/"
    return [Check("webhooks", "ok", f"{len(routes)} route(s) at {where}<route>")]


async def _check_mcp_servers(settings: Settings, contact: bool) -> list[Check]:
    """Every configured MCP server connected once, with the tools it offers."""
    if not contact:
        return [Check(f"mcp {name}", "ok", "configured (not contacted)") for name in settings.mcp_servers]
    # Imported here: it loads the MCP SDK, about a second of CPU every other command need not pay.
    from gateway.runner.tool_servers import probe_servers

    found = await probe_servers(settings, os.environ)
    return [Check(f"mcp {name}", "ok" if up else "fail", detail) for name, up, detail in found]


def _check_context_engine(settings: Settings) -> Check:
    """``context.engine`` names an installed engine that can be built (a plugin is imported and its
    factory called, as ``hygieia run`` does), and every configured strategy exists."""
    # Imported here: the doctor must not load the agent for the checks that do not need it.
    from agent.engines.strategies.base import UnknownStrategy, load_strategy
    from agent.offline import OfflineProvider
    from gateway.runner.models import build_context_engine

    name = settings.context.engine
    try:
        build_context_engine(settings, OfflineProvider())
        strategies = [s for s in settings.compression.strategies if load_strategy(s, settings.compression)]
    except (ConfigError, UnknownStrategy) as exc:
        return Check("context engine", "fail", str(exc))
    detail = name if name != "compressor" else f"compressor: {' -> '.join(strategies) or 'no strategies'}"
    return Check("context engine", "ok", detail)


def _check_caching(settings: Settings) -> Check:
    """The caching policy in use; ``auto`` is recommended (docs/models-and-cost.md: the month's replay)."""
    caching = settings.prompt_caching
    if not caching.enabled:
        return Check(
            "prompt caching",
            "warn",
            "off: every turn pays the whole prompt (4.6x the cost of auto in the month's replay)",
        )
    detail = f"cache_ttl {caching.cache_ttl}, {caching.mode}"
    if caching.cache_ttl != "auto":
        detail += (
            "; cache_ttl: auto chooses 5m or 1h from the chat's pace (about half the cost in the replay)"
        )
    return Check("prompt caching", "ok", detail)


def _check_data_dir(settings: Settings) -> Check:
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=settings.data_dir):
            pass
    except OSError as exc:
        return Check("data dir", "fail", f"{settings.data_dir}: not writable ({exc.strerror})")
    return Check("data dir", "ok", str(settings.data_dir.resolve()))


async def _check_database(settings: Settings) -> Check:
    url = settings.resolved_database_url
    db = Database(url)
    try:
        await db.connect()
        current = await current_revision(url)
    except (SQLAlchemyError, OSError, StoreError) as exc:  # Database.connect wraps its failure in StoreError
        cause = exc.__cause__ if isinstance(exc, StoreError) and exc.__cause__ is not None else exc
        return Check("database", "fail", f"{safe_url(url)}: cannot connect ({type(cause).__name__})")
    finally:
        await db.dispose()
    head = head_revision()
    if current is None:
        return Check("database", "warn", f"{safe_url(url)}: empty; `hygieia migrate` (or `run`) builds it")
    if current != head:
        return Check(
            "database", "warn", f"{safe_url(url)}: at {current}, head is {head}; run `hygieia migrate`"
        )
    problem = await _search_index_problem(url)
    if problem is not None:
        return Check("database", "warn", f"{safe_url(url)} at {current}: {problem}")
    return Check("database", "ok", f"{safe_url(url)} at {current}")


async def check_clock(url: str, clock: Clock = utcnow) -> Check | None:
    """This node's clock against the database's (PostgreSQL judges every lease by its own, so an
    offset does not break the cluster, but it skews the times this node logs and schedules by);
    None when the database cannot be reached (the database line says why)."""
    try:
        async with Database(url) as db:
            if db.dialect != "postgresql":
                return Check("clock", "ok", "SQLite: one process, whose clock is the database's")
            before = clock()
            at = await Store(db).db_now()
            after = clock()
    except (SQLAlchemyError, OSError, StoreError):
        return None
    offset = (before + (after - before) / 2 - at).total_seconds()
    detail = (
        f"this node's clock is {abs(offset):.1f} s {'ahead of' if offset >= 0 else 'behind'} the database's"
    )
    if abs(offset) > MAX_CLOCK_OFFSET_SECONDS:
        return Check(
            "clock", "warn", f"{detail} (over {MAX_CLOCK_OFFSET_SECONDS:g} s: check NTP on this node)"
        )
    return Check("clock", "ok", detail)


async def _search_index_problem(url: str) -> str | None:
    async with Database(url) as db:
        return await Store(db).search_index_problem()


async def _reachable(url: str) -> str | None:
    """None when a TCP connection to the URL's host and port opens, else why not."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CHECK_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        return f"{host}:{port} unreachable ({type(exc).__name__})"
    writer.close()
    await writer.wait_closed()
    return None


async def _check_anthropic(settings: Settings, contact: bool) -> Check:
    if settings.offline:
        return Check("anthropic", "warn", "ANTHROPIC_API_KEY not set: the offline provider answers")
    base = settings.anthropic_base_url or "https://api.anthropic.com"
    if contact and (problem := await _reachable(base)):
        return Check("anthropic", "fail", f"{base}: {problem}")
    return Check("anthropic", "ok", f"key set; model {settings.model}, summaries {settings.summary_model}")


def _check_models(settings: Settings) -> Check:
    """The window, budget and prices each configured model gets; a model the table does not
    know runs on conservative defaults until a ``models:`` entry names it."""
    from agent.tokens import closest_model
    from agent.types import effective_budget  # the model side: only when asked
    from gateway.runner.models import budget_for, model_info_for

    parts: list[str] = []
    unknown: list[str] = []
    for model in dict.fromkeys((settings.model, settings.summary_model)):
        info = model_info_for(settings, model)
        budget = budget_for(settings, model)
        room = f"budget {budget:,}" if budget is not None else "no budget"
        if budget is not None and budget > info.context_window:
            room += f" (effective {effective_budget(info.context_window, budget):,}: the window)"
        parts.append(
            f"{model}: window {info.context_window:,}, {room}, output {info.max_output:,}, "
            f"${info.input_price:g}/${info.output_price:g} per MTok"
        )
        if not info.known:
            unknown.append(model)
    if unknown:
        guesses = [
            f"{m} (did you mean {g}?)" if (g := closest_model(m, list(settings.models))) else m
            for m in unknown
        ]
        return Check(
            "models",
            "warn",
            f"not in the model table, running on conservative defaults: {', '.join(guesses)} "
            f"(set its window and prices under models:); " + "; ".join(parts),
        )
    return Check("models", "ok", "; ".join(parts))


def _check_budget(settings: Settings) -> Check:
    """The main model's effective budget and every threshold, in tokens of it."""
    from agent.types import effective_budget
    from gateway.runner.models import budget_for, context_window_for

    model = settings.model
    window = context_window_for(settings, model)
    budget = budget_for(settings, model)
    room = effective_budget(window, budget)
    compression = settings.compression
    if budget is None:
        head = f"{model}: no budget, the whole {window:,}-token window"
    elif budget > window:
        head = f"{model}: budget {budget:,}, effective {room:,} (the window)"
    else:
        head = f"{model}: effective budget {room:,} (window {window:,})"
    marks = [
        ("in-loop", compression.threshold_for(model)),
        ("hygiene", compression.hygiene_threshold_for(model)),
    ]
    if "prune" in compression.strategies:
        marks.append(("prune", compression.prune_at))
    sweep = settings.scheduler.sweep
    if settings.scheduler.enabled and sweep.enabled:
        marks.append(("sweep", sweep.min_fill))
    if not compression.enabled:
        return Check("budget", "warn", f"{head}; compression is off (compression.enabled: false)")
    parts = [f"{name} {int(share * room):,} ({100 * share:.0f}%)" for name, share in marks]
    return Check("budget", "ok", f"{head}; thresholds in tokens: {', '.join(parts)}")


async def _check_telegram(settings: Settings, contact: bool) -> Check:
    if settings.telegram_bot_token is None:
        return Check("telegram", "ok", "not configured (TELEGRAM_BOT_TOKEN unset)")
    token = settings.telegram_bot_token.get_secret_value()
    if not TELEGRAM_TOKEN.match(token):
        return Check("telegram", "fail", "TELEGRAM_BOT_TOKEN does not look like <digits>:<secret>")
    if not contact:
        return Check("telegram", "ok", "token well-formed (not contacted)")
    root = (settings.telegram_base_url or "https://api.telegram.org").rstrip("/")
    data = await _get_json(f"{root}/bot{token}/getMe", headers={})
    if isinstance(data, str):
        return Check("telegram", "fail", f"getMe failed: {data}")
    if not data.get("ok"):
        return Check("telegram", "fail", f"getMe refused: {data.get('description', 'no reason given')}")
    me = data.get("result")
    username = me.get("username", "?") if isinstance(me, dict) else "?"
    return Check("telegram", "ok", f"bot @{username}")


async def _check_discord(settings: Settings, contact: bool) -> Check:
    if settings.discord_bot_token is None:
        return Check("discord", "ok", "not configured (DISCORD_BOT_TOKEN unset)")
    if not contact:
        return Check("discord", "ok", "token set (not contacted)")
    root = (settings.discord_api_base or "https://discord.com/api/v10").rstrip("/")
    token = settings.discord_bot_token.get_secret_value()
    data = await _get_json(f"{root}/users/@me", headers={"Authorization": f"Bot {token}"})
    if isinstance(data, str):
        return Check("discord", "fail", f"/users/@me failed: {data}")
    return Check("discord", "ok", f"bot {data.get('username', '?')}")


async def _get_json(url: str, *, headers: dict[str, str]) -> dict[str, object] | str:
    """The JSON body of a GET, or a one-line reason it could not be had (never the URL: it holds tokens)."""
    import aiohttp  # only the online checks need an HTTP client

    timeout = aiohttp.ClientTimeout(total=CHECK_TIMEOUT)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url, headers=headers) as resp:
            if resp.status in (401, 403):
                return f"HTTP {resp.status}: the token was refused"
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return type(exc).__name__
    return body if isinstance(body, dict) else "unexpected answer"


def _check_access(settings: Settings) -> list[Check]:
    checks: list[Check] = []
    platforms_on = settings.telegram_bot_token is not None or settings.discord_bot_token is not None
    if settings.allow_all_users:
        checks.append(Check("access", "warn", "HYGIEIA_ALLOW_ALL_USERS=true: anyone can talk to the bot"))
    elif not settings.allowed_users and platforms_on:
        checks.append(
            Check("access", "warn", "HYGIEIA_ALLOWED_USERS is empty: nobody but the console is answered")
        )
    else:
        checks.append(Check("access", "ok", f"{len(settings.allowed_users)} allowed user(s)"))
    if settings.admin_token is None:
        checks.append(Check("admin api", "ok", "HYGIEIA_ADMIN_TOKEN unset: the admin API stays off"))
    else:
        # Imported here: the admin app loads FastAPI, which no other command needs.
        from gateway.admin.middleware import check_admin_token

        try:
            check_admin_token(settings.admin_token.get_secret_value())
            checks.append(Check("admin api", "ok", "token set"))
        except ConfigError as exc:
            checks.append(Check("admin api", "fail", str(exc)))
    return checks
