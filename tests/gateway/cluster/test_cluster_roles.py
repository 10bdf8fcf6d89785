"""``--role intake`` and ``--role worker`` on PostgreSQL: an intake stores what it receives
and serves nothing; a worker runs no intake, serves the inbox and delivers through its own
send-only adapter."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import select

from gateway.runner import Service, build_adapters
from gateway.store.models import inbox
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import ChatResponder
from tests.gateway.platforms.telegram_bot.test_telegram_service import ALICE, make_settings, until
from tests.store.engines import only

pytest_plugins = [
    "tests.gateway.platforms.telegram_bot.test_telegram_service"
]  # its telegram/anthropic/responder fixtures


async def statuses(store: Store) -> list[str]:
    async with store.db.transaction(write=False) as s:
        return [str(v) for v in await s.scalars(select(inbox.c.status).order_by(inbox.c.id))]


@only("postgresql")
async def test_an_intake_stores_and_a_worker_serves_and_delivers(
    tmp_path: Path,
    db_url: str,
    store: Store,
    telegram: FakeTelegram,
    anthropic: FakeAnthropic,
    responder: ChatResponder,
) -> None:
    """The intake alone stores the message and nobody answers; a worker joins and answers it once."""
    settings = make_settings(tmp_path, db_url, telegram, anthropic)
    worker = await Service.build(
        settings, build_adapters(settings, ["telegram"]), migrate=False, role="worker"
    )
    await worker.start()
    try:
        await asyncio.sleep(1.0)
        assert telegram.calls("getUpdates") == []  # a worker runs no intake
    finally:
        await worker.stop()

    intake = await Service.build(
        settings, build_adapters(settings, ["telegram"]), migrate=False, role="intake"
    )
    await intake.start()
    try:
        telegram.push_message(ALICE, "hello cluster", user_id=ALICE)
        await until(lambda: telegram.acked_offset > 0 and not telegram.pending_update_ids)
        await asyncio.sleep(1.0)
        assert await statuses(store) == ["pending"] and telegram.sent == []  # stored, not served

        worker = await Service.build(
            settings, build_adapters(settings, ["telegram"]), migrate=False, role="worker"
        )
        await worker.start()
        try:
            await telegram.wait_for_sent(1, timeout=15)
            assert [m.plain_text for m in telegram.sent] == ["reply: hello cluster"]
            assert await statuses(store) == ["done"]
            assert telegram.conflicts == 0
        finally:
            await worker.stop()
    finally:
        await intake.stop()


@only("postgresql")
async def test_telegram_webhooks_run_on_every_intake_node_polling_is_elected(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    hook = {"mode": "webhook", "webhook_url": "http://127.0.0.1:1/hook", "webhook_secret": "s3cret-token"}
    for mode, elected in (({}, True), (hook, False)):
        settings = make_settings(tmp_path, db_url, telegram, anthropic, telegram=mode or {"poll_timeout": 1})
        service = await Service.build(settings, build_adapters(settings, ["telegram"]), migrate=False)
        try:
            assert service.cluster is not None
            assert [s.lease for s in service.cluster.election._slots] == (
                ["intake:telegram"] if elected else []
            )
            assert [a.name for a in service.adapters] == ([] if elected else ["telegram"])
        finally:
            await service.db.dispose()
