"""The inbox payload as a typed shape: written at intake, parsed once after the claim."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.platforms.base import Attachment, InboundMessage
from gateway.serving.commands import command_in
from gateway.serving.inbound import clean_text, inbox_payload, parse_item, parse_payload
from gateway.store.records import InboxRecord
from gateway.store.repository import Store

SENT_AT = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)


def _message(**overrides: Any) -> InboundMessage:
    fields: dict[str, Any] = {
        "platform": "telegram",
        "chat_id": "-100",
        "user_id": "42",
        "text": "hello there",
        "platform_message_id": "7",
        "thread_id": "3",
        "user_name": "Ada",
        "chat_type": "group",
        "timestamp": SENT_AT,
        "attachments": (Attachment(kind="document", file_id="f1", file_name="a.txt", size=12, text="hi"),),
    }
    fields.update(overrides)
    return InboundMessage(**fields)


def _record(payload: dict[str, Any], *, addressed: bool = True, message_id: str | None = "7") -> InboxRecord:
    return InboxRecord(
        id=9,
        platform="telegram",
        chat_id="-100",
        platform_message_id=message_id,
        session_key="telegram:group:-100",
        payload=payload,
        addressed=addressed,
        status="processing",
        attempts=1,
        received_at=SENT_AT,
        message_id=None,
    )


async def test_the_inbox_payload_round_trips_through_the_store_unchanged(store: Store) -> None:
    msg = _message()
    written = inbox_payload(msg, clean_text(msg.text, 1000))
    inbox_id, created = await store.inbox_put(
        platform=msg.platform,
        chat_id=msg.chat_id,
        platform_message_id=msg.platform_message_id,
        session_key="telegram:group:-100",
        payload=written,
        addressed=True,
    )
    assert created
    item = parse_item(await store.inbox_get(inbox_id))
    assert item.payload == written
    assert (item.text, item.user_id, item.thread_id) == ("hello there", "42", "3")
    assert item.payload["attachments"][0]["file_name"] == "a.txt"


def test_an_addressed_command_is_a_command_to_run() -> None:
    item = parse_item(_record(parse_payload({"text": "/compact the budget"})))
    assert item.is_command
    assert item.command is not None and (item.command.name, item.command.args) == ("compact", "the budget")


def test_a_command_said_to_someone_else_is_only_text() -> None:
    item = parse_item(_record(parse_payload({"text": "/new"}), addressed=False))
    assert item.command is None and not item.is_command


def test_an_edited_command_is_recognised_but_not_run() -> None:
    item = parse_item(_record(parse_payload({"text": "/new", "edit_of": "7"})))
    assert item.command is not None
    assert item.edit_of == "7"
    assert not item.is_command


def test_the_reply_target_quotes_the_message_in_its_thread() -> None:
    target = parse_item(_record(parse_payload({"text": "hi", "thread_id": 3}))).reply_target
    assert (target.chat_id, target.thread_id, target.reply_to_message_id) == ("-100", "3", "7")


def test_a_field_of_the_wrong_type_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="truncated_from"):
        parse_item(_record({"text": "hi", "truncated_from": "a lot"}))


def test_a_scheduled_run_quotes_nothing() -> None:
    item = parse_item(_record(parse_payload({"text": "due", "scheduled_task": "t1"}), message_id="task:t1:1"))
    assert item.reply_target.reply_to_message_id is None


def test_intake_and_the_parsed_item_classify_alike() -> None:
    for text in ("/stop", "/help@hygieia_bot", "/unknown", "hello", " /context ", "/"):
        for addressed in (True, False):
            parsed = parse_item(_record(parse_payload({"text": text}), addressed=addressed)).command
            assert parsed == command_in(text, addressed=addressed)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from([*sorted(parse_payload({}).keys()), "other"]), _json, max_size=12))
def test_any_stored_json_parses_into_the_typed_shape_or_is_refused_by_name(raw: dict[str, Any]) -> None:
    try:
        item = parse_item(_record(raw))
    except ValueError as exc:
        assert "inbox payload" in str(exc)
        return
    assert isinstance(item.text, str)
    assert all(isinstance(a["kind"], str) for a in item.payload["attachments"])
    assert item.edit_of is None or isinstance(item.edit_of, str)
