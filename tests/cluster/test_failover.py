"""Chats fail over between workers on the default leases: a worker killed mid-turn, a worker paused.

One ``--role intake`` node (Telegram) and ``--role worker`` nodes on one PostgreSQL schema, the
fake model answering slowly so that the turns are mid-call when a worker dies or stops. Nothing
here lowers a lease: the defaults an operator gets are what is tested.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.cluster.harness import TELEGRAM_BASE_CHAT, Chat, Cluster, Node, cluster, postgres_url, tail

POSTGRES_URL = postgres_url()
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.postgres,
    pytest.mark.skipif(POSTGRES_URL is None, reason="needs HYGIEIA_TEST_POSTGRES_URL"),
    pytest.mark.timeout(300),
]
MARKER = re.compile(r"c\d{3} m\d{3}")
FAILOVER_BOUND = 15.0  # the bound on the defaults (9 s lease + a third of it to notice)


def _chats(count: int) -> list[Chat]:
    return [Chat("telegram", TELEGRAM_BASE_CHAT + i) for i in range(count)]


async def _up(c: Cluster, workers: int) -> None:
    """The intake polls Telegram, then ``workers`` workers start and their heartbeat leases are live
    (one at a time: four Python processes starting at once on a loaded machine take minutes)."""
    intake = await c.start_node("in", "--role", "intake", "--platform", "telegram")
    await c.wait_for_leader("intake:telegram", intake.pid, within=120)
    for n in range(workers):
        await c.start_node(f"w{n + 1}", "--role", "worker")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        live = [lease for lease in await c.store.lease_list("node:worker:") if lease.live(datetime.now(UTC))]
        if len(live) >= workers:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the workers did not come up")


async def _claims(c: Cluster) -> dict[str, str]:
    """chat id -> the worker id holding its inbox items."""
    async with c.store.db.transaction(write=False) as s:
        rows = await s.execute(text("SELECT chat_id, lease_owner FROM inbox WHERE status = 'processing'"))
        return {str(chat): str(owner) for chat, owner in rows}


async def _all_claimed(c: Cluster, count: int, within: float = 60.0) -> dict[str, str]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        claims = await _claims(c)
        if len(claims) >= count:
            return claims
        await asyncio.sleep(0.05)
    raise AssertionError(f"not every chat was claimed within {within} s")


def _victim(c: Cluster, claims: dict[str, str]) -> tuple[Node, set[str]]:
    """The worker serving the most chats, and those chats."""
    by_pid: dict[int, set[str]] = {}
    for chat, owner in claims.items():
        by_pid.setdefault(int(owner.split(":")[-2]), set()).add(chat)
    pid = max(by_pid, key=lambda p: len(by_pid[p]))
    node = next(n for n in c.nodes if n.pid == pid)
    return node, by_pid[pid]


async def _answered(c: Cluster, chats: list[Chat], k: int, within: float) -> dict[int, float]:
    """When each chat had its ``k``-th answer (monotonic seconds)."""
    seen: dict[int, float] = {}
    deadline = time.monotonic() + within
    while len(seen) < len(chats):
        for chat in chats:
            if chat.chat_id not in seen and len(c.replies(chat)) > k:
                seen[chat.chat_id] = time.monotonic()
        if time.monotonic() > deadline:
            missing = [chat.chat_id for chat in chats if chat.chat_id not in seen]
            raise AssertionError(f"chats {missing} got no answer {k} within {within} s")
        await asyncio.sleep(0.05)
    return seen


async def _picked_up(c: Cluster, victim: Node, chats: set[str], since: float) -> float:
    """Seconds from ``since`` until every one of ``chats`` is claimed by another worker or done."""
    mark = f":{victim.pid}:"
    query = text("SELECT chat_id FROM inbox WHERE status <> 'done' AND lease_owner LIKE :mark")
    while True:
        async with c.store.db.transaction(write=False) as s:
            left = {str(chat) for chat in await s.scalars(query, {"mark": f"%{mark}%"})} & chats
        if not left:
            return time.monotonic() - since
        if time.monotonic() - since > 60:
            raise AssertionError(f"chats {sorted(left)} still held by the lost worker after 60 s")
        await asyncio.sleep(0.05)


def _say_all(c: Cluster, chats: list[Chat], k: int) -> None:
    for chat in chats:
        c.say(chat, f"c{chat.chat_id % 1000:03d} m{k:03d}")


def _dump(c: Cluster) -> None:
    for node in c.nodes:
        print(f"--- {node.name} (exit {node.proc.returncode})\n{tail(node.log)}")


async def test_a_killed_workers_chats_are_answered_by_another_within_the_bound(tmp_path: Path) -> None:
    assert POSTGRES_URL is not None
    async with cluster(POSTGRES_URL, tmp_path, latency=3.0) as c:
        await _up(c, 3)
        chats = _chats(9)
        try:
            _say_all(c, chats, 0)
            victim, held = _victim(c, await _all_claimed(c, len(chats)))
            await asyncio.sleep(0.5)  # mid model call (3 s)
            victim.kill()
            killed = time.monotonic()
            pickup = await _picked_up(c, victim, held, killed)
            answers = await _answered(c, chats, 0, within=90)
            _say_all(c, chats, 1)
            await _answered(c, chats, 1, within=90)
        except AssertionError:
            _dump(c)
            raise
        await asyncio.sleep(2.0)  # a late second copy would show up meanwhile
        for chat in chats:
            got = [m.group(0) for m in map(MARKER.search, c.replies(chat)) if m]
            assert got == chat.sent, f"chat {chat.chat_id}: {c.replies(chat)}"  # once each, in order
        answered_after = max(answers[int(chat)] for chat in held) - killed
        print(
            f"\nkilled a worker holding {len(held)} chats; picked up after {pickup:.1f} s, "
            f"answered {answered_after:.1f} s after the kill (model 3 s)"
        )
        assert pickup <= FAILOVER_BOUND


async def test_a_paused_worker_writes_nothing_after_losing_its_lease(tmp_path: Path) -> None:
    assert POSTGRES_URL is not None
    async with cluster(POSTGRES_URL, tmp_path, latency=2.0) as c:
        await _up(c, 2)
        chats = _chats(6)
        try:
            _say_all(c, chats, 0)
            victim, held = _victim(c, await _all_claimed(c, len(chats)))
            await asyncio.sleep(0.3)  # mid model call (2 s)
            victim.proc.send_signal(signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                pickup = await _picked_up(c, victim, held, stopped)
                await _answered(c, chats, 0, within=90)
            finally:
                victim.proc.send_signal(signal.SIGCONT)
            # Its model answer is waiting in its socket: give it time to try every write it had left.
            await asyncio.sleep(8.0)
        except AssertionError:
            _dump(c)
            raise
        for chat in chats:
            assert len(c.replies(chat)) == 1, f"chat {chat.chat_id}: {c.replies(chat)}"
        async with c.store.db.transaction(write=False) as s:
            assistant = await s.scalar(text("SELECT count(*) FROM messages WHERE role = 'assistant'"))
            queued = await s.scalar(text("SELECT count(*) FROM outbox"))
        assert (assistant, queued) == (len(chats), len(chats))  # nothing from the paused turns
        assert victim.proc.returncode is None  # it lived on, and simply wrote nothing
        print(f"\npaused a worker holding {len(held)} chats; picked up after {pickup:.1f} s")
