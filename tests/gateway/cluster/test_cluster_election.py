"""One Telegram intake per cluster: elected through a lease, taken over when the leader dies."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.errors import ConfigError
from gateway.cluster.election import ClusterState, Election, IntakeSlot
from gateway.cluster.metrics import MetricsServer, render
from gateway.cluster.roles import check_role, intake_lease
from gateway.platforms.base import InboundHandler, OutboundTarget, PlatformAdapter
from gateway.store.repository import Store
from tests.fakes.telegram import FakeTelegram
from tests.gateway.cli.test_cli import hygieia
from tests.gateway.inbox_recorder import Inbox
from tests.gateway.telegram_support import make_adapter
from tests.process_env import clean_env

TTL = 2.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def node(store: Store, fake: FakeTelegram, name: str, inbox: Inbox) -> tuple[Election, ClusterState]:
    state = ClusterState("all", name, clustered=True)
    slot = IntakeSlot(intake_lease("telegram"), "telegram", lambda: make_adapter(fake))
    return Election(store, [slot], inbox, state, ttl_seconds=TTL), state


async def crash(election: Election) -> None:
    """What kill -9 leaves: no more renewals, no release; the dead poller's connection closes."""
    for task in election._tasks:
        task.cancel()
    await asyncio.gather(*election._tasks, return_exceptions=True)
    adapter = election.adapter("telegram")
    assert adapter is not None
    await adapter.stop()


async def test_one_leader_polls_and_a_standby_takes_over_when_it_dies(
    store: Store, fake: FakeTelegram
) -> None:
    inbox = Inbox()
    first, first_state = node(store, fake, "node-a", inbox)
    second, second_state = node(store, fake, "node-b", inbox)
    await first.start()
    await second.start()
    try:
        assert first_state.leading() == ["intake:telegram"] and second_state.leading() == []
        fake.push_message(1, "before", user_id=1)
        await inbox.wait_for(1)
        await asyncio.sleep(TTL)  # several renewals and retries: still one poller
        assert fake.conflicts == 0 and second.adapter("telegram") is None
        assert b'hygieia_intake_leader{lease="intake:telegram"} 1.0' in render(first_state)
        assert b'hygieia_intake_leader{lease="intake:telegram"} 0.0' in render(second_state)

        await crash(first)
        died = time.monotonic()
        # The bound is the lease's TTL plus one retry period, with slack for a loaded CI machine
        # (two test workers on two cores once measured 4.54 s against a 4.5 s bound).
        while not second_state.leading():
            assert time.monotonic() - died < TTL + TTL / 4 + 4.0, "no takeover within the bound"
            await asyncio.sleep(0.05)
        fake.push_message(1, "after", user_id=1)
        await inbox.wait_for(2)
        assert [m.text for m in inbox.messages] == ["before", "after"]
        assert second_state.slots["intake:telegram"].generation == 2  # fenced: a new holder
        assert fake.conflicts == 0
    finally:
        await second.stop()
        first._running.clear()
        await first.stop()


async def test_a_leader_that_stops_hands_over_at_once(store: Store, fake: FakeTelegram) -> None:
    inbox = Inbox()
    first, _ = node(store, fake, "node-a", inbox)
    second, second_state = node(store, fake, "node-b", inbox)
    await first.start()
    await second.start()
    try:
        await first.stop()  # releases the lease
        stopped = time.monotonic()
        while not second_state.leading():
            assert time.monotonic() - stopped < TTL / 4 + 2.0
            await asyncio.sleep(0.05)
    finally:
        await second.stop()


def test_roles_other_than_all_are_refused_on_sqlite() -> None:
    with pytest.raises(ConfigError, match="needs PostgreSQL"):
        check_role("worker", "sqlite")
    with pytest.raises(ConfigError, match="unknown role"):
        check_role("leader", "postgresql")
    assert check_role("intake", "postgresql") == "intake"
    assert check_role("all", "sqlite") == "all"


def test_the_cli_refuses_a_worker_role_on_sqlite_in_one_line(tmp_path: Path) -> None:
    env = clean_env() | {"HYGIEIA_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"}
    result = hygieia("run", "--role", "worker", env=env)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        "error: --role worker needs PostgreSQL (HYGIEIA_DATABASE_URL); SQLite runs one process "
        "with --role all"
    ]


async def test_each_process_can_serve_its_own_metrics() -> None:
    state = ClusterState("worker", "host:1:abcd", clustered=True)
    server = MetricsServer(state, "127.0.0.1", 0)
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
    finally:
        server.stop()
    assert b'hygieia_node_info{node="host:1:abcd",role="worker"} 1.0' in body


class SlowStart(PlatformAdapter):
    """A platform whose intake takes longer than the lease to start (a Discord bot with many shards)."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = False

    async def start(self, handler: InboundHandler) -> None:
        await asyncio.sleep(self.seconds)
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        return []


async def test_the_lease_is_kept_while_a_slow_intake_starts(store: Store) -> None:
    slow = SlowStart(TTL * 2)
    slot = IntakeSlot("intake:slow", "slow", lambda: slow)
    first_state = ClusterState("all", "node-a", clustered=True)
    second_state = ClusterState("all", "node-b", clustered=True)
    first = Election(store, [slot], Inbox(), first_state, ttl_seconds=TTL)
    second = Election(store, [IntakeSlot("intake:slow", "slow", lambda: SlowStart(0))], Inbox(), second_state,
                      ttl_seconds=TTL)  # fmt: skip
    starting = asyncio.create_task(first.start())
    try:
        await asyncio.sleep(0.2)
        await second.start()
        await starting
        assert slow.started and first_state.leading() == ["intake:slow"]
        assert second_state.leading() == [] and first_state.slots["intake:slow"].generation == 1
    finally:
        await second.stop()
        await first.stop()
