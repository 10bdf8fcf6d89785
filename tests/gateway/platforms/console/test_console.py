"""The console adapter in pipe mode: a scripted user, one line at a time, each after the previous reply."""

from __future__ import annotations

import asyncio
import io

import pytest

from gateway.errors import AdapterError
from gateway.platforms.base import InboundMessage, OutboundTarget
from gateway.platforms.console.adapter import ConsoleAdapter


class _Echo:
    """Answers each message after a delay, recording what was in flight when a message arrived."""

    def __init__(self, console: ConsoleAdapter, delay: float = 0.05) -> None:
        self.console = console
        self.delay = delay
        self.received: list[InboundMessage] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, msg: InboundMessage) -> None:
        self.received.append(msg)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        asyncio.get_running_loop().create_task(self._answer(msg))

    async def _answer(self, msg: InboundMessage) -> None:
        await asyncio.sleep(self.delay)
        target = OutboundTarget("console", msg.chat_id, None, msg.platform_message_id)
        await self.console.send(OutboundTarget("console", msg.chat_id), "(a notice is not a reply)")
        await self.console.send(target, f"echo {msg.text}")
        self.in_flight -= 1


async def test_pipe_mode_sends_each_line_after_the_previous_reply_and_finishes_at_eof() -> None:
    out = io.StringIO()
    console = ConsoleAdapter(user="alice", stdin=io.StringIO("one\n\n   \ntwo\nthree\n"), stdout=out)
    echo = _Echo(console)
    await console.start(echo)
    await asyncio.wait_for(console.finished.wait(), 5)
    await console.stop()

    assert [m.text for m in echo.received] == ["one", "two", "three"]  # blank lines skipped
    assert echo.max_in_flight == 1
    assert [line for line in out.getvalue().splitlines() if line.startswith("echo")] == [
        "echo one",
        "echo two",
        "echo three",
    ]
    assert {m.chat_id for m in echo.received} == {"alice"} and all(
        m.is_dm and m.addressed for m in echo.received
    )


async def test_message_ids_are_unique_across_runs_so_a_restart_is_not_a_duplicate() -> None:
    ids: list[str] = []
    for _ in range(2):
        console = ConsoleAdapter(user="alice", stdin=io.StringIO("same line\n"), stdout=io.StringIO())
        echo = _Echo(console, delay=0)
        await console.start(echo)
        await asyncio.wait_for(console.finished.wait(), 5)
        await console.stop()
        ids.extend(m.platform_message_id or "" for m in echo.received)
    assert len(set(ids)) == 2


async def test_sending_before_start_fails_loudly() -> None:
    console = ConsoleAdapter(user="alice", stdin=io.StringIO(""), stdout=io.StringIO())
    with pytest.raises(AdapterError):
        await console.send(OutboundTarget("console", "alice"), "hi")
