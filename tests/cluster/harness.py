"""A cluster of real ``hygieia run`` processes on one PostgreSQL schema, with the fakes in this process.

Used by tests/cluster/test_cluster.py and bench/cluster.py. Users are played at the fakes: each
chat sends its next message once the previous one is answered (as a person does), half the
chats on Telegram (DMs), half on Discord (DMs). Replies are counted where they land: at the fakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram, TelegramLimits
from tests.process_env import clean_env

ROOT = Path(__file__).resolve().parents[2]
TELEGRAM_BASE_CHAT = 700_000
DISCORD_USER_BASE = 1_400_000_000_000_000_000


@dataclass
class Node:
    """One ``hygieia run`` child; its log is a file (a pipe nobody reads would fill and block it)."""

    name: str
    proc: asyncio.subprocess.Process
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)

    async def stop(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


@dataclass
class Chat:
    platform: str
    chat_id: int
    sent: list[str] = field(default_factory=list)


@dataclass
class Cluster:
    """The fakes, the database and the nodes; see :func:`cluster`."""

    url: str
    tmp: Path
    telegram: FakeTelegram
    discord: FakeDiscord
    anthropic: FakeAnthropic
    store: Store
    settings_env: dict[str, str]
    nodes: list[Node] = field(default_factory=list)
    _seen: list[int] = field(default_factory=lambda: [0, 0])
    _by_chat: dict[tuple[str, int | str], list[str]] = field(default_factory=dict)

    async def start_node(self, name: str, *args: str) -> Node:
        log = self.tmp / f"{name}.log"
        env = dict(self.settings_env)
        env["HYGIEIA_DATA_DIR"] = str(self.tmp / name)
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.cli", "run", *args,
                stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out, env=env, cwd=ROOT,
            )  # fmt: skip
        node = Node(name, proc, log)
        self.nodes.append(node)
        return node

    async def leader_pid(self, lease: str) -> int | None:
        """The pid of the process that holds ``lease`` live (worker ids are host:pid:random)."""
        held = await self.store.lease_get(lease)
        if held is None or held.expires_at <= _now():
            return None
        return int(held.owner.split(":")[-2])

    def listening(self, lease: str) -> bool:
        """The intake behind ``lease`` is receiving: polling Telegram, or identified on Discord's
        gateway (Discord drops events for a bot that is not connected, as the real one does)."""
        if lease.endswith("telegram"):
            return bool(self.telegram.calls("getUpdates"))
        return self.discord.identify_count > 0

    async def wait_for_leader(self, lease: str, pid: int | None = None, within: float = 60.0) -> int:
        """The leader's pid once it holds ``lease`` and its intake is receiving."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = await self.leader_pid(lease)
            if found is not None and (pid is None or found == pid) and self.listening(lease):
                return found
            for node in self.nodes:
                if node.proc.returncode not in (None, -signal.SIGKILL):
                    raise AssertionError(f"{node.name} exited {node.proc.returncode}:\n{tail(node.log)}")
            await asyncio.sleep(0.1)
        raise AssertionError(f"no leader for {lease} within {within} s")

    def chats(self, count: int) -> list[Chat]:
        half = count // 2
        tg = [Chat("telegram", TELEGRAM_BASE_CHAT + i) for i in range(count - half)]
        dc = [Chat("discord", DISCORD_USER_BASE + i) for i in range(half)]
        return tg + dc

    def replies(self, chat: Chat) -> list[str]:
        """What the chat has received so far (indexed as it arrives: 60 users polling must not
        rescan every sent message, or this process, which also runs the fakes, falls behind)."""
        for message in self.telegram.sent[self._seen[0] :]:
            self._by_chat.setdefault(("telegram", message.chat_id), []).append(message.plain_text)
        for sent in self.discord.sent[self._seen[1] :]:
            self._by_chat.setdefault(("discord", sent.channel_id), []).append(sent.content)
        self._seen[:] = [len(self.telegram.sent), len(self.discord.sent)]
        return self._by_chat.get((chat.platform, chat.chat_id), [])

    def say(self, chat: Chat, words: str) -> None:
        chat.sent.append(words)
        if chat.platform == "telegram":
            self.telegram.push_message(chat.chat_id, words, user_id=chat.chat_id)
        else:
            self.discord.push_message(chat.chat_id, words, author_id=chat.chat_id, author_name="user")

    async def converse(self, chat: Chat, messages: int, answered: Callable[[], None], within: float) -> None:
        """``messages`` turns, each sent once the previous one is answered."""
        for k in range(messages):
            self.say(chat, f"c{chat.chat_id % 1000:03d} m{k:03d}")
            deadline = time.monotonic() + within
            while len(self.replies(chat)) <= k:
                if time.monotonic() > deadline:
                    rows = await self.chat_rows(chat)
                    raise AssertionError(
                        f"chat {chat.chat_id}: no answer to message {k} within {within} s\n"
                        f"at {_now()}; its rows:\n{rows}"
                    )
                await asyncio.sleep(0.05)
            answered()

    async def inbox_counts(self) -> tuple[int, int]:
        """(rows, distinct platform messages) in the inbox."""
        async with self.store.db.transaction(write=False) as s:
            rows = await s.scalar(text("SELECT count(*) FROM inbox"))
            distinct = await s.scalar(
                text(
                    "SELECT count(*) FROM "
                    "(SELECT DISTINCT platform, chat_id, platform_message_id FROM inbox) AS d"
                )
            )
        return int(rows or 0), int(distinct or 0)

    async def chat_rows(self, chat: Chat) -> str:
        """The chat's inbox and outbox rows and the leases, printed when a test fails."""
        async with self.store.db.transaction(write=False) as s:
            rows = [
                *await s.execute(
                    text(
                        "SELECT 'inbox', id, status, attempts, lease_owner, lease_until, received_at, "
                        "processed_at, error FROM inbox WHERE chat_id = :chat ORDER BY id"
                    ),
                    {"chat": str(chat.chat_id)},
                ),
                *await s.execute(
                    text(
                        "SELECT 'outbox', id, status, attempts, next_attempt_at, created_at, sent_at, "
                        "inbox_ids, error FROM outbox WHERE CAST(target AS TEXT) LIKE :chat ORDER BY id"
                    ),
                    {"chat": f"%{chat.chat_id}%"},
                ),
                *await s.execute(text("SELECT 'lease', name, owner, generation, expires_at FROM leases")),
            ]
        return "\n".join(" | ".join(map(str, row)) for row in rows)

    async def outbox_states(self) -> dict[str, int]:
        async with self.store.db.transaction(write=False) as s:
            result = await s.execute(text("SELECT status, count(*) FROM outbox GROUP BY status"))
            return {str(status): int(n) for status, n in result}


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def tail(path: Path, lines: int = 40) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


async def _schema(base_url: str, action: str, schema: str) -> None:
    engine = create_async_engine(base_url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f'{action} SCHEMA "{schema}"' + (" CASCADE" if action == "DROP" else "")))
    finally:
        await engine.dispose()


@contextlib.asynccontextmanager
async def cluster(
    base_url: str,
    tmp: Path,
    *,
    latency: float = 0.2,
    extra_env: dict[str, str] | None = None,
    telegram_limits: TelegramLimits | None = None,
) -> AsyncIterator[Cluster]:
    """Fakes up, a fresh schema migrated; every node killed and the schema dropped on the way out.

    ``telegram_limits``: the Telegram fake enforces those flood limits (429 beyond them)."""
    await asyncio.to_thread(tmp.mkdir, parents=True, exist_ok=True)
    schema = f"cluster_{uuid.uuid4().hex[:12]}"
    await _schema(base_url, "CREATE", schema)
    url = make_url(base_url).update_query_dict({"options": f"-csearch_path={schema}"})
    url_text = url.render_as_string(hide_password=False)
    telegram = FakeTelegram(long_poll_cap=0.5, limits=telegram_limits)
    async with telegram as tg, FakeDiscord() as dc, FakeAnthropic() as llm:
        llm.delay = latency
        env = (
            clean_env()
            | {
                "HYGIEIA_DATABASE_URL": url_text,
                "TELEGRAM_BOT_TOKEN": tg.token,
                "HYGIEIA_TELEGRAM_BASE_URL": tg.root,
                "DISCORD_BOT_TOKEN": dc.token,
                "HYGIEIA_DISCORD_API_BASE": dc.api_base,
                "HYGIEIA_DISCORD_GATEWAY_URL": dc.gateway_url,
                "ANTHROPIC_API_KEY": "fake-key",
                "ANTHROPIC_BASE_URL": llm.base_url,
                "HYGIEIA_ALLOW_ALL_USERS": "true",
                "HYGIEIA_LOG_LEVEL": "WARNING",
                "HYGIEIA_LOG_FORMAT": "text",
                "HYGIEIA_DELIVERY__STREAMING": "false",  # one sendMessage per reply: counted at the fakes
                "HYGIEIA_SCHEDULER__ENABLED": "false",
                "HYGIEIA_DISCORD__SLASH_COMMANDS": "false",
                # No lease or poll interval lowered: the cluster is tested on the operator's defaults.
                "PYTHONPATH": str(ROOT),
            }
            | (extra_env or {})
        )
        await upgrade_to_head(url_text)  # once, before the nodes (each would race to migrate)
        db = Database(url_text)
        await db.connect()
        found = Cluster(url_text, tmp, tg, dc, llm, Store(db), env)
        try:
            yield found
        finally:
            for node in found.nodes:
                node.kill()
            await asyncio.gather(*(n.proc.wait() for n in found.nodes), return_exceptions=True)
            await db.dispose()
            await _schema(base_url, "DROP", schema)


async def run_users(
    c: Cluster,
    chats: list[Chat],
    per_chat: int,
    *,
    within: float,
    on_progress: Callable[[int], Awaitable[None]] | None = None,
) -> float:
    """Every chat converses at once; seconds taken. ``on_progress(answered)`` runs after each answer."""
    answered = 0
    pending: set[asyncio.Task[None]] = set()

    def one_more() -> None:
        nonlocal answered
        answered += 1
        if on_progress is not None:
            task = asyncio.ensure_future(on_progress(answered))
            pending.add(task)
            task.add_done_callback(pending.discard)

    started = time.monotonic()
    await asyncio.gather(*(c.converse(chat, per_chat, one_more, within) for chat in chats))
    await asyncio.gather(*pending)
    return time.monotonic() - started


def postgres_url() -> str | None:
    return os.environ.get("HYGIEIA_TEST_POSTGRES_URL") or None
