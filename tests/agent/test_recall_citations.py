"""Recall that cites: session_search and recall hits go to the model as ``search_result`` blocks
(source naming the session and message, citations on) where the model takes them, plain text
elsewhere; a search from inside a turn never returns the turn's own question or tool call.

Through the loop: the real SDK against the fake Messages API, which checks search_result shapes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agent.types import ChatMessage
from tests.agent.loop_support import make_session, rig
from tests.agent.test_tools import archive
from tests.fakes.anthropic import text_reply, tool_use_reply


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the request's last (user) message."""
    last = body["messages"][-1]
    return [b for b in last["content"] if b.get("type") == "tool_result"]


def result_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    [result] = tool_results(body)
    content = result["content"]
    assert isinstance(content, list), content
    return content


async def test_the_first_hit_of_a_search_from_a_turn_is_not_the_turns_own_question_or_call() -> None:
    async with rig() as r:
        earlier = await r.preload(
            [
                ChatMessage.user("the code name for the launch is qv2, remember it"),
                ChatMessage.assistant("noted"),
            ]
        )
        r.script.add(tool_use_reply("session_search", {"query": "qv2"}), text_reply("it was the launch"))
        await r.turn("what was qv2 again?")
        body = r.script.chat_bodies[1]
    blocks = [b for b in result_blocks(body) if b["type"] == "search_result"]
    assert blocks, result_blocks(body)
    assert blocks[0]["source"].endswith(f"/message/{earlier[0].id}")
    cited = " ".join(c["text"] for b in blocks for c in b["content"])
    assert "what was qv2 again" not in cited
    assert "session_search" not in cited


async def test_session_search_hits_are_search_result_blocks_naming_session_and_message() -> None:
    async with rig() as r:
        earlier = await r.preload(
            [ChatMessage.user("we picked the orange kayak"), ChatMessage.assistant("ok")]
        )
        r.script.add(tool_use_reply("session_search", {"query": "kayak"}), text_reply("orange"))
        await r.turn("which kayak?")
        body = r.script.chat_bodies[1]
    blocks = result_blocks(body)
    hits = [b for b in blocks if b["type"] == "search_result"]
    assert [h["source"] for h in hits] == [f"hygieia://session/{r.session.id}/message/{earlier[0].id}"]
    [hit] = hits
    assert hit["citations"] == {"enabled": True}
    assert hit["title"].startswith(f"#{earlier[0].id} ")
    assert [c["type"] for c in hit["content"]] == ["text"] and "orange kayak" in hit["content"][0]["text"]
    assert blocks[0]["type"] == "text"  # the snapshot line and the count stay plain text


async def test_recall_pages_are_search_result_blocks_too() -> None:
    async with rig() as r:
        old = await r.preload([ChatMessage.user(f"old message {i} about sailing") for i in range(3)])
        await archive(r.store, r.session.id, old)
        r.script.add(tool_use_reply("recall", {}), text_reply("done"))
        await r.turn("what did we say about sailing?")
        body = r.script.chat_bodies[1]
    hits = [b for b in result_blocks(body) if b["type"] == "search_result"]
    assert len(hits) == 3
    assert all(h["citations"] == {"enabled": True} for h in hits)
    assert "old message 0 about sailing" in hits[0]["content"][0]["text"]


async def test_a_model_without_search_results_gets_the_hits_as_plain_text() -> None:
    old_model = replace(make_session(), model="claude-3-haiku-20240307")
    async with rig(session=old_model) as r:
        await r.preload([ChatMessage.user("we picked the orange kayak"), ChatMessage.assistant("ok")])
        r.script.add(tool_use_reply("session_search", {"query": "kayak"}), text_reply("orange"))
        await r.turn("which kayak?")
        body = r.script.chat_bodies[1]
    blocks = result_blocks(body)
    assert {b["type"] for b in blocks} == {"text"}
    assert "orange kayak" in " ".join(b["text"] for b in blocks)
