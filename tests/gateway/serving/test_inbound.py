"""Inbound text: odd Unicode removed, oversized text capped, the author/time header."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from gateway.platforms.base import Attachment, InboundMessage
from gateway.serving.inbound import clean_text, inbox_payload, parse_item, user_message
from gateway.store.records import InboxRecord


@given(st.text())
def test_clean_text_leaves_no_nul_control_or_lone_surrogate(text: str) -> None:
    cleaned = clean_text(text, 10_000).text
    assert "\x00" not in cleaned
    assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in cleaned)
    cleaned.encode("utf-8")  # always encodable


@given(st.text(min_size=1), st.integers(min_value=1, max_value=50))
def test_clean_text_never_exceeds_the_cap(text: str, cap: int) -> None:
    result = clean_text(text, cap)
    assert len(result.text) <= cap
    assert result.truncated == (result.original_chars > cap)


def _record(msg: InboundMessage) -> InboxRecord:
    return InboxRecord(
        id=5,
        platform=msg.platform,
        chat_id=msg.chat_id,
        platform_message_id=msg.platform_message_id,
        session_key="k",
        payload=inbox_payload(msg, clean_text(msg.text, 1000)),
        addressed=msg.addressed,
        status="pending",
        attempts=0,
        received_at=datetime(2026, 1, 1, tzinfo=UTC),
        message_id=None,
    )


def test_the_user_message_carries_author_and_time_in_a_header() -> None:
    msg = InboundMessage(
        platform="t",
        chat_id="c",
        user_id="u",
        text="hello",
        user_name="Ann",
        timestamp=datetime(2026, 11, 29, 9, 5, tzinfo=UTC),
        platform_message_id="p1",
    )
    message = user_message(parse_item(_record(msg)))
    assert message.text == "[Ann, 09:05 UTC] hello"
    assert message.platform_message_id == "p1"


def test_a_message_without_a_platform_id_gets_one_from_the_inbox() -> None:
    msg = InboundMessage(platform="t", chat_id="c", user_id="u", text="x")
    assert user_message(parse_item(_record(msg))).platform_message_id == "inbox:5"


def test_attachments_are_described_and_their_text_included() -> None:
    msg = InboundMessage(
        platform="t",
        chat_id="c",
        user_id="u",
        text="see file",
        attachments=(Attachment(kind="document", file_name="notes.txt", size=2048, text="line one"),),
    )
    text = user_message(parse_item(_record(msg))).text
    assert "[attachment: document (notes.txt, 2 KB)]" in text and "line one" in text


def _file(name: str, text: str) -> Attachment:
    return Attachment(kind="document", file_name=name, size=len(text), text=text)


def test_every_attachment_and_the_whole_message_are_capped_with_a_note() -> None:
    msg = InboundMessage(
        platform="t",
        chat_id="c",
        user_id="u",
        text="x" * 500,
        attachments=(_file("a.txt", "a" * 300), _file("b.txt", "b" * 100), _file("c.txt", "c" * 100)),
    )
    payload = inbox_payload(msg, clean_text(msg.text, 400), attachment_chars=250, total_chars=700)
    a, b, c = payload["attachments"]
    assert len(payload["text"]) == 400
    assert (len(a["text"]), a["note"]) == (250, "kept the first 250 of 300 characters")
    assert (len(b["text"]), b["note"]) == (50, "kept the first 50 of 100 characters")
    assert (c["text"], c["note"]) == (None, "not read: the message had reached its size limit")
    assert len(payload["text"]) + sum(len(f["text"] or "") for f in payload["attachments"]) == 700


def test_attachment_text_is_cleaned_like_message_text() -> None:
    msg = InboundMessage(
        platform="t", chat_id="c", user_id="u", text="", attachments=(_file("n.txt", "a\x00b\ud800c\x07d"),)
    )
    [attachment] = inbox_payload(msg, clean_text("", 100))["attachments"]
    assert attachment["text"] == "abcd"
