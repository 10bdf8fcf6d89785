"""Citable tool output: search_result blocks next to the text, cut with it, plain for old models."""

from __future__ import annotations

from agent.tools import ResumePoint, ToolOutput, cap_output, tool_result_block
from agent.tools.citable import plain_search_results, search_result


def hits_output(n: int) -> ToolOutput:
    head = "snapshot\n3 matches:\n"
    lines = [f"#{i} user: hit number {i} " + "x" * 40 for i in range(n)]
    points, at = [], len(head)
    for i, line in enumerate(lines):
        points.append(ResumePoint(at, {"offset": i}))
        at += len(line) + 1
    cited = tuple(
        search_result(f"hygieia://session/s/message/{i}", f"#{i} user", f"hit number {i}") for i in range(n)
    )
    text = head + "\n".join(lines) + "\nmore may match"
    return ToolOutput(text, resume_points=tuple(points), cited=cited, cited_end=at)


def test_the_result_carries_head_text_then_the_hits_then_the_tail() -> None:
    block = tool_result_block("t1", hits_output(3))
    kinds = [b["type"] for b in block["content"]]
    assert kinds == ["text", "search_result", "search_result", "search_result", "text"]
    assert block["content"][0]["text"] == "snapshot\n3 matches:"
    assert block["content"][-1]["text"] == "more may match"


def test_a_cut_output_keeps_only_the_hits_shown_whole() -> None:
    full = hits_output(10)
    cut = cap_output("session_search", full, 400)
    kept = [b["source"] for b in cut.cited]
    assert 0 < len(kept) < 10
    assert all(f"hit number {s.rsplit('/', 1)[1]} " in cut.text for s in kept)
    block = tool_result_block("t1", cut)
    assert "output truncated" in block["content"][-1]["text"]


def test_plain_search_results_turns_hits_into_text_in_tool_results() -> None:
    wire = [{"role": "user", "content": [tool_result_block("t1", hits_output(2))]}]
    [message] = plain_search_results(wire)
    inner = message["content"][0]["content"]
    assert {b["type"] for b in inner} == {"text"}
    assert inner[1]["text"] == "#0 user: hit number 0"
