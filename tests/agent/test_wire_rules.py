"""What API version 2026-10-21 refuses is taken out of a request's messages, the rest kept as is."""

from __future__ import annotations

from agent.wire_rules import version_safe

CITATION = {"type": "char_location", "cited_text": "kayak", "document_index": 0}


def test_a_user_texts_citations_go_and_its_text_stays() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "the kayak", "citations": [CITATION]}]}]
    assert version_safe(messages) == [{"role": "user", "content": [{"type": "text", "text": "the kayak"}]}]


def test_an_assistant_document_becomes_a_short_note() -> None:
    doc = {
        "type": "document",
        "title": "plan.pdf",
        "source": {"type": "text", "media_type": "text/plain", "data": "x"},
    }
    (message,) = version_safe([{"role": "assistant", "content": [doc]}])
    assert message["content"] == [{"type": "text", "text": "[document: plan.pdf]"}]


def test_an_assistant_answers_citations_and_untouched_messages_stay_the_same_objects() -> None:
    answer = {"role": "assistant", "content": [{"type": "text", "text": "k", "citations": [CITATION]}]}
    question = {"role": "user", "content": [{"type": "text", "text": "which?"}]}
    out = version_safe([question, answer])
    assert out[0] is question and out[1] is answer
