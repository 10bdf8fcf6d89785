"""A takeover mid-stream finishes what the lost worker left, once and in order.

One ``--role intake`` node (Telegram) and three ``--role worker`` nodes on one PostgreSQL schema,
replies streamed (edited in place at the Telegram fake) and the fake model writing slowly, so a
worker is lost while its replies are half shown: killed (SIGKILL), or frozen (SIGSTOP) and woken
later. Each chat sends its next message once the previous one is completely answered. Then, per
chat: every message answered exactly once, in order; every partial the lost worker left ends with
the restart's "(interrupted …)" note; and no ``streams`` row stays open.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from gateway.outbound.streaming import RESTART_NOTE
from tests.cluster.harness import Chat, Cluster, Node, cluster, postgres_url, tail
from tests.cluster.test_failover import _all_claimed, _chats, _up, _victim
from tests.fakes.anthropic_sse import Pacing

POSTGRES_URL = postgres_url()
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.postgres,
    pytest.mark.skipif(POSTGRES_URL is None, reason="needs HYGIEIA_TEST_POSTGRES_URL"),
    pytest.mark.timeout(480),
]
COMPLETE = re.compile(r"^ack: .*(c\d{3} m\d{3})$", re.DOTALL)
MARKER = re.compile(r"c\d{3} m\d{3}")
SLOW = Pacing(chunk_chars=3, delay=0.25, first_delay=0.3)  # a reply streams for ~3 s
# Edited in place, not drafted: a takeover is about partials a dead node left showing as messages
# (a draft lapses by itself and leaves none).
STREAMING = {"HYGIEIA_DELIVERY__STREAMING": "true", "HYGIEIA_TELEGRAM__DRAFTS": "false"}


def shown(c: Cluster, chat: Chat) -> list[str]:
    """What the chat's bot messages show now (after edits), in the order they were posted."""
    return [m.plain_text for m in c.telegram.sent if str(m.chat_id) == str(chat.chat_id)]


def answers(c: Cluster, chat: Chat) -> list[str]:
    """The markers of the complete answers the chat shows, in order."""
    return [found.group(1) for found in map(COMPLETE.match, shown(c, chat)) if found]


async def converse(c: Cluster, chat: Chat, messages: int, within: float) -> None:
    for k in range(messages):
        words = f"c{chat.chat_id % 1000:03d} m{k:03d}"
        c.say(chat, words)
        deadline = time.monotonic() + within
        while words not in answers(c, chat):
            if time.monotonic() > deadline:
                raise AssertionError(f"chat {chat.chat_id}: no complete answer to {words}: {shown(c, chat)}")
            await asyncio.sleep(0.05)


async def streaming_for(c: Cluster, victim: Node, held: set[str], within: float = 60.0) -> None:
    """Until a partial reply in one of the victim's chats has been edited: mid-stream, past its
    first post (a process killed between the platform accepting a message and our commit of its
    id cannot know that message: delivery is at-least-once at the platform boundary)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for chat, _, plain, _ in c.telegram.edits:
            if str(chat) in held and not COMPLETE.match(plain):
                return
        await asyncio.sleep(0.02)
    raise AssertionError(f"none of {sorted(held)} began streaming within {within} s")


async def woken_and_refused(victim: Node, within: float = 20.0) -> None:
    """Until the woken worker has met the fence (its turn's next write refused), or ``within``."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if "lost the session's lease" in await asyncio.to_thread(tail, victim.log, 400):
            return
        await asyncio.sleep(0.2)


async def open_streams(c: Cluster, within: float = 30.0) -> int:
    """Open ``streams`` rows, once none is left or ``within`` passed."""
    deadline = time.monotonic() + within
    while True:
        async with c.store.db.transaction(write=False) as s:
            left = int(await s.scalar(text("SELECT count(*) FROM streams WHERE status = 'open'")) or 0)
        if left == 0 or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.2)


def check(c: Cluster, chats: list[Chat]) -> tuple[int, int, int]:
    """(replies twice, chats out of order, partials not marked) across ``chats``."""
    twice = out_of_order = unmarked = 0
    for chat in chats:
        got = answers(c, chat)
        twice += len(got) - len(set(got))
        out_of_order += int(list(dict.fromkeys(got)) != chat.sent)
        for message in shown(c, chat):
            if not COMPLETE.match(message) and not message.endswith(RESTART_NOTE):
                unmarked += 1
    return twice, out_of_order, unmarked


async def run(tmp_path: Path, how: str, chats: int = 6, per_chat: int = 3) -> None:
    assert POSTGRES_URL is not None
    async with cluster(POSTGRES_URL, tmp_path, extra_env=STREAMING) as c:
        c.anthropic.pacing = SLOW
        await _up(c, 3)
        users = _chats(chats)
        talking = [asyncio.ensure_future(converse(c, chat, per_chat, within=120)) for chat in users]
        try:
            victim, held = _victim(c, await _all_claimed(c, len(users)))
            await streaming_for(c, victim, held)
            lost = time.monotonic()
            if how == "kill":
                victim.kill()
            else:
                victim.proc.send_signal(signal.SIGSTOP)
            try:
                await asyncio.wait(talking, timeout=30.0 if how == "stop" else 150.0)
            finally:
                if how == "stop":
                    victim.proc.send_signal(signal.SIGCONT)  # woken: its late writes must be refused
            await asyncio.gather(*talking)
            finished = time.monotonic() - lost
            if how == "stop":
                await woken_and_refused(victim)
            left = await open_streams(c)
        except BaseException:
            for task in talking:
                task.cancel()
            for node in c.nodes:
                print(f"--- {node.name} (exit {node.proc.returncode})\n{tail(node.log)}")
            raise
        twice, out_of_order, unmarked = check(c, users)
        partials = sum(1 for chat in users for m in shown(c, chat) if m.endswith(RESTART_NOTE))
        print(
            f"\n{how}: lost a worker holding {len(held)} of {len(users)} chats mid-stream; all answered "
            f"{finished:.1f} s later; replies twice {twice}, out of order {out_of_order}, partials "
            f"marked {partials}, unmarked {unmarked}, open streams left {left}"
        )
        assert (twice, out_of_order, unmarked, left) == (0, 0, 0, 0), [shown(c, chat) for chat in users]
        if how == "stop":
            assert victim.proc.returncode is None  # it lived on, and its late writes were refused


async def test_a_worker_killed_mid_stream_is_taken_over_once_and_in_order(tmp_path: Path) -> None:
    await run(tmp_path, "kill")


async def test_a_worker_frozen_mid_stream_and_woken_is_taken_over_once_and_in_order(tmp_path: Path) -> None:
    await run(tmp_path, "stop")
