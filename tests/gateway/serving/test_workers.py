"""Several workers on one database: one session is served by one worker at a time, and every
message is answered exactly once, whichever worker received it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from agent.transcript import validate_messages
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer
from tests.gateway.conftest import ChatResponder, Rig, gateway_rig, inbound


@dataclass
class Overlap:
    """Counts chat calls in flight for the one session across every worker's fake model."""

    in_flight: int = 0
    most: int = 0

    def wrap(self, responder: ChatResponder) -> Any:
        async def slow_and_counted(body: dict[str, Any]) -> Answer:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            try:
                await asyncio.sleep(0.2)
                return await responder(body)
            finally:
                self.in_flight -= 1

        return slow_and_counted


async def _settle(rigs: list[Rig], within: float = 30.0) -> None:
    # Each worker may pick up what the other received: settle until neither has work left.
    for _ in range(3):
        for rig in rigs:
            await asyncio.wait_for(rig.gateway.wait_idle(), within)
            await rig.delivery.flush()
        await asyncio.sleep(0.3)


async def test_two_workers_never_serve_one_session_at_once_and_answer_each_message_once(store: Store) -> None:
    overlap = Overlap()
    async with gateway_rig(store) as a, gateway_rig(store) as b:
        for rig in (a, b):
            rig.fake.responder = overlap.wrap(rig.responder)
        for i in range(8):
            worker = a if i % 2 == 0 else b
            await worker.gateway.intake(inbound(f"message {i}", message_id=f"m{i}"))
            await asyncio.sleep(0.05)
        await _settle([a, b])

        assert overlap.most == 1
        for inbox_id in range(1, 9):
            reply = await store.outbox_for_inbox(inbox_id)
            assert reply is not None and reply.status == "sent"
        sent = a.adapter.texts + b.adapter.texts
        assert len(sent) == len(set(sent))  # no reply delivered twice
        session = await store.current_session("test:dm:chat-1")
        assert session is not None
        assert validate_messages(await store.load_active(session.id)) == []
