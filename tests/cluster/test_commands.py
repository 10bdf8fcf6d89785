"""Commands reach the turn wherever it runs: ``/stop`` and ``/new`` received by the intake, and an
admin ending the session from yet another process, stop a worker's turn within a second.

One ``--role intake`` node (Telegram) and one ``--role worker`` node on one PostgreSQL schema; the
fake model takes 8 s, so the turn is mid-call when the command arrives at another process.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from gateway.admin.actions import AdminActions
from tests.cluster.harness import TELEGRAM_BASE_CHAT, Chat, Cluster, cluster, postgres_url, tail

POSTGRES_URL = postgres_url()
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.postgres,
    pytest.mark.skipif(POSTGRES_URL is None, reason="needs HYGIEIA_TEST_POSTGRES_URL"),
    pytest.mark.timeout(300),
]
MODEL_SECONDS = 8.0
NEW = "Started a new conversation. The previous one is kept and still searchable."


async def turn_on_a_worker(c: Cluster, chat: Chat) -> None:
    """An intake and a worker up, and ``chat``'s question mid-call on the worker."""
    intake = await c.start_node("in", "--role", "intake", "--platform", "telegram")
    await c.wait_for_leader("intake:telegram", intake.pid, within=120)
    worker = await c.start_node("w1", "--role", "worker")
    deadline = time.monotonic() + 120
    while not [x for x in await c.store.lease_list("node:worker:") if x.live(datetime.now(UTC))]:
        assert time.monotonic() < deadline, "the worker did not come up"
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # its listener connects
    c.say(chat, "c000 m000")
    while not [r for r in c.anthropic.requests if r.path.endswith("/v1/messages")]:
        assert time.monotonic() < deadline + 60, "the turn never reached the model"
        await asyncio.sleep(0.05)
    async with c.store.db.transaction(write=False) as s:
        owner = await s.scalar(text("SELECT lease_owner FROM inbox WHERE status = 'processing'"))
    assert f":{worker.pid}:" in str(owner)  # the turn runs on the worker, not the intake


async def stopped_after(c: Cluster, since: datetime) -> float:
    """Seconds from ``since`` until the question's inbox item was done (the turn stopped)."""
    async with c.store.db.transaction(write=False) as s:
        done = await s.scalar(text("SELECT processed_at FROM inbox WHERE payload->>'text' = 'c000 m000'"))
    assert done is not None, "the turn was not stopped"
    return float((done - since).total_seconds())


async def command_received_at(c: Cluster, command: str) -> datetime:
    async with c.store.db.transaction(write=False) as s:
        found = await s.scalar(
            text("SELECT received_at FROM inbox WHERE payload->>'text' = :t"), {"t": command}
        )
    assert found is not None
    return found  # type: ignore[no-any-return]


@pytest.mark.parametrize(("command", "answer"), [("/stop", "Stopped."), ("/new", NEW)])
async def test_a_command_sent_through_the_intake_stops_a_turn_running_on_another_worker(
    tmp_path: Path, command: str, answer: str
) -> None:
    assert POSTGRES_URL is not None
    async with cluster(POSTGRES_URL, tmp_path, latency=MODEL_SECONDS) as c:
        chat = Chat("telegram", TELEGRAM_BASE_CHAT)
        try:
            await turn_on_a_worker(c, chat)
            c.telegram.push_message(chat.chat_id, command, user_id=chat.chat_id)
            began = time.monotonic()
            while not c.replies(chat):
                assert time.monotonic() - began < MODEL_SECONDS, f"no answer to {command} before the model's"
                await asyncio.sleep(0.05)
            await asyncio.sleep(MODEL_SECONDS)  # the stopped turn's answer would have come by now
        except AssertionError:
            for node in c.nodes:
                print(f"--- {node.name}\n{tail(node.log)}")
            raise
        assert c.replies(chat) == [answer]
        after = await stopped_after(c, await command_received_at(c, command))
        print(f"\nthe turn on the worker stopped {after:.2f} s after the intake stored {command}")
        assert after <= 1.0


async def test_an_admin_ending_the_session_stops_its_turn_on_a_worker(tmp_path: Path) -> None:
    """The admin acts from a third process (this one, as ``hygieia admin serve`` would)."""
    assert POSTGRES_URL is not None
    async with cluster(POSTGRES_URL, tmp_path, latency=MODEL_SECONDS) as c:
        chat = Chat("telegram", TELEGRAM_BASE_CHAT)
        try:
            await turn_on_a_worker(c, chat)
            [session] = await c.store.list_sessions()
            ended = datetime.now(UTC)
            await AdminActions(c.store).end(session.id, actor="test")
            await asyncio.sleep(MODEL_SECONDS)  # the turn's answer would have come by now
        except AssertionError:
            for node in c.nodes:
                print(f"--- {node.name}\n{tail(node.log)}")
            raise
        assert c.replies(chat) == []  # no answer into the ended conversation
        after = await stopped_after(c, ended)
        print(f"\nthe turn on the worker stopped {after:.2f} s after the admin ended the session")
        assert after <= 1.0
