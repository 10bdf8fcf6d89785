"""Rate limits shared by the cluster: a burst of replies to 100 Telegram chats through a strict fake.

One ``--role intake`` node polls Telegram; 1 or 3 ``--role worker`` nodes answer (fake model,
200 ms) and send. The Telegram fake enforces Telegram's flood limits (30 messages/s overall, one
per second per chat: ``tests/fakes/telegram_limits.py``) and answers 429 with ``retry_after``
beyond them. 100 chats each send two messages, the second once the first is answered. Every
reply must arrive, once, in order; the 429 count is reported and, with the limits shared through
PostgreSQL (the default), must be 0. The per-process variants (``cluster.shared_rate_limits:
false``, the code before) run with ``-m full`` and give the figures to compare.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.cluster.harness import TELEGRAM_BASE_CHAT, Chat, Cluster, cluster, postgres_url, run_users, tail
from tests.fakes.telegram import TelegramLimits

POSTGRES_URL = postgres_url()
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.postgres,
    pytest.mark.skipif(POSTGRES_URL is None, reason="needs HYGIEIA_TEST_POSTGRES_URL"),
    pytest.mark.timeout(300),
]
MARKER = re.compile(r"c\d{3} m\d{3}")
CHATS = 100
PER_CHAT = 2


async def workers_up(c: Cluster, count: int, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while len([x for x in await c.store.lease_list("node:worker:") if x.live(datetime.now(UTC))]) < count:
        assert time.monotonic() < deadline, "the workers did not come up"
        for node in c.nodes:
            assert node.proc.returncode is None, f"{node.name} exited:\n{tail(node.log)}"
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # their listeners connect


async def rows_of(c: Cluster, chat: Chat) -> str:
    """The chat's inbox and outbox rows, to tell a repeated turn from a repeated send."""
    async with c.store.db.transaction(write=False) as s:
        inbox = await s.execute(
            text("SELECT id, status, lease_owner, attempts FROM inbox WHERE chat_id = :c ORDER BY id"),
            {"c": str(chat.chat_id)},
        )
        outbox = await s.execute(
            text(
                "SELECT id, status, attempts, error, delivered_ids, sent_at FROM outbox "
                "WHERE target->>'chat_id' = :c ORDER BY id"
            ),
            {"c": str(chat.chat_id)},
        )
        return f"inbox {inbox.all()}\noutbox {outbox.all()}"


async def burst(tmp_path: Path, workers: int, *, shared: bool) -> int:
    """The scenario; returns the 429s the fake answered."""
    assert POSTGRES_URL is not None
    env = {} if shared else {"HYGIEIA_CLUSTER__SHARED_RATE_LIMITS": "false"}
    async with cluster(POSTGRES_URL, tmp_path, extra_env=env, telegram_limits=TelegramLimits()) as c:
        intake = await c.start_node("in", "--role", "intake", "--platform", "telegram")
        for n in range(workers):
            await c.start_node(f"w{n + 1}", "--role", "worker", "--platform", "telegram")
        await c.wait_for_leader("intake:telegram", intake.pid)
        await workers_up(c, workers)
        chats = [Chat("telegram", TELEGRAM_BASE_CHAT + i) for i in range(CHATS)]
        try:
            seconds = await run_users(c, chats, PER_CHAT, within=60)
        except AssertionError:
            for node in c.nodes:
                print(f"--- {node.name} (exit {node.proc.returncode})\n{tail(node.log)}")
            raise
        for chat in chats:
            replies = c.replies(chat)
            got = [m.group(0) for m in map(MARKER.search, replies) if m]
            if got != chat.sent:
                print(await rows_of(c, chat))
            assert got == chat.sent, f"chat {chat.chat_id}: {replies}"
        # The fake has a reply the moment it is sent; its row is marked sent just after.
        states = await c.outbox_states()
        settle = time.monotonic() + 15
        while shared and states != {"sent": CHATS * PER_CHAT} and time.monotonic() < settle:
            await asyncio.sleep(0.2)
            states = await c.outbox_states()
        refused = c.telegram.limits.refused if c.telegram.limits is not None else {}
        print(
            f"\n{workers} worker(s), limits {'shared' if shared else 'per process'}: "
            f"{CHATS * PER_CHAT} replies to {CHATS} chats in {seconds:.1f} s; "
            f"429s {c.telegram.too_many_requests} ({dict(refused)}); outbox {states}"
        )
        if shared:  # every reply sent once; per process, a row can still wait out a 429 here
            assert states == {"sent": CHATS * PER_CHAT}
        return c.telegram.too_many_requests


@pytest.mark.parametrize("workers", [1, 3])
async def test_a_burst_to_100_chats_stays_within_telegrams_limits(tmp_path: Path, workers: int) -> None:
    assert await burst(tmp_path, workers, shared=True) == 0


@pytest.mark.full
@pytest.mark.parametrize("workers", [1, 3])
async def test_the_same_burst_with_per_process_limits(tmp_path: Path, workers: int) -> None:
    """The code before: every reply still arrives (429s waited out), but Telegram is hit beyond its limits."""
    await burst(tmp_path, workers, shared=False)
