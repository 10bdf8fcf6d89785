"""A search from inside a turn, over the SQL store: the turn's own question and tool call are never
among the hits (ranked by the store's full-text index, a short tool call would come first)."""

from __future__ import annotations

from typing import Any

from gateway.store.repository import Store
from tests.fakes.anthropic import Answer, text_reply, tool_use_reply
from tests.gateway.conftest import gateway_rig, is_summarizer_call


def tool_result_text(body: dict[str, Any]) -> str:
    [result] = [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    content = result["content"]
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "search_result":
            parts.append(block["title"] + ": " + " ".join(c["text"] for c in block["content"]))
    return "\n".join(parts)


async def test_the_turns_own_question_and_tool_call_are_not_search_hits(store: Store) -> None:
    async with gateway_rig(store) as rig:
        await rig.say("the code name for the launch is qv2, please remember it for later on")
        await rig.settle()
        calls: list[dict[str, Any]] = []

        def answer(body: dict[str, Any]) -> Answer | None:
            if is_summarizer_call(body):
                return None
            calls.append(body)
            if len(calls) == 1:
                return tool_use_reply("session_search", {"query": "qv2"})
            return text_reply("the launch")

        rig.responder.override = answer
        await rig.say("qv2?")
        await rig.settle()
    text = tool_result_text(calls[1])
    lines = [line for line in text.splitlines() if line.startswith("#")]
    assert lines, text
    assert "code name for the launch" in lines[0]
    assert not any("session_search" in line or "session search" in line for line in lines), text
    assert not any(line.rstrip().endswith("qv2?") or "⟦qv2⟧?" in line for line in lines), text
