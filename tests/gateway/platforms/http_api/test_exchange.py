"""What a live reply's edits become on the wire: deltas that only ever add text."""

from __future__ import annotations

from gateway.platforms.http_api.errors import overloaded
from gateway.platforms.http_api.exchange import Delta, Event, Exchange, Failed, Finished


def _drain(exchange: Exchange) -> list[Event]:
    events: list[Event] = []
    while not exchange.events.empty():
        events.append(exchange.events.get_nowait())
    return events


def test_growing_text_becomes_the_added_part_only() -> None:
    exchange = Exchange("m", "alice:default", stream=True)
    exchange.show("Hello")
    exchange.show("Hello, wor")
    exchange.show("Hello, world")
    exchange.finish("Hello, world")
    assert _drain(exchange) == [Delta("Hello"), Delta(", wor"), Delta("ld"), Finished("Hello, world", "stop")]


def test_a_tool_status_line_is_not_sent_and_a_new_call_starts_a_paragraph() -> None:
    exchange = Exchange("m", "alice:default", stream=True)
    exchange.show("Let me look.")
    exchange.show("⏳ searching the history…")
    exchange.show("Found it")
    assert _drain(exchange) == [Delta("Let me look."), Delta("\n\nFound it")]
    assert exchange.streamed == "Let me look.\n\nFound it"


def test_a_whole_reply_after_a_partial_stream_sends_the_rest() -> None:
    exchange = Exchange("m", "alice:default", stream=True)
    exchange.show("The answer")
    exchange.finish("The answer is 42.")
    assert _drain(exchange) == [Delta("The answer"), Delta(" is 42."), Finished("The answer is 42.", "stop")]


def test_nothing_follows_a_failure() -> None:
    exchange = Exchange("m", "alice:default", stream=False)
    error = overloaded()
    exchange.fail(error)
    exchange.finish("late answer")
    assert _drain(exchange) == [Failed(error)]
