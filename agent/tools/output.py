"""Turning a tool's output into a tool_result block, cut to the cap with a recovery pointer."""

from __future__ import annotations

import json

from agent.tools.base import JSONObject, ResumePoint, ToolOutput
from agent.types import ContentBlock


def _call(tool_name: str, tool_input: JSONObject) -> str:
    return f"{tool_name} with {json.dumps(tool_input, ensure_ascii=False, sort_keys=True)}"


def _notice(tool_name: str, shown: int, total: int, resume: ResumePoint | None, exact: bool) -> str:
    head = f"\n[output truncated at {shown} of {total} chars; "
    if resume is None:
        return head + f"the last {total - shown} chars were cut and {tool_name} cannot page them]"
    if exact:
        return head + f"call {_call(tool_name, resume.input)} for the rest]"
    return (
        head + f"the rest of this part was cut; call {_call(tool_name, resume.input)} to continue after it]"
    )


def cap_output(tool_name: str, output: ToolOutput, cap: int) -> ToolOutput:
    """``output`` if it fits in ``cap`` chars, else its head plus one line saying what was cut
    and, when the tool can page, the exact call that returns the rest."""
    text = output.text
    total = len(text)
    if total <= cap:
        return output
    points = sorted((p for p in output.resume_points if 0 < p.at < total), key=lambda p: p.at)
    reserve = 200
    for _ in range(4):
        budget = max(cap - reserve, 0)
        fitting = [p for p in points if p.at <= budget]
        if fitting:
            shown = fitting[-1].at
            notice = _notice(tool_name, shown, total, fitting[-1], exact=True)
        else:
            shown = budget
            after = next((p for p in points if p.at > budget), None)
            notice = _notice(tool_name, shown, total, after, exact=False)
        if shown + len(notice) <= cap:
            break
        reserve = len(notice) + 1
    # A notice longer than the cap itself (a huge input echoed back) is still better than no pointer.
    cited = _cited_within(output, shown)
    return ToolOutput(
        text=text[:shown] + notice,
        is_error=output.is_error,
        media=output.media,
        resume_points=output.resume_points[: len(cited)],
        cited=cited,
        cited_end=shown if cited else 0,
    )


def _cited_within(output: ToolOutput, shown: int) -> tuple[ContentBlock, ...]:
    """The cited items whose text lies wholly in the first ``shown`` chars."""
    if not output.cited or len(output.cited) != len(output.resume_points):
        return ()
    ends = [p.at for p in output.resume_points[1:]] + [output.cited_end]
    return tuple(block for block, end in zip(output.cited, ends, strict=True) if end <= shown)


def tool_result_block(tool_use_id: str, output: ToolOutput) -> ContentBlock:
    """The wire block for one result; an empty output still says something (empty text is a 400)."""
    block: ContentBlock = {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": output.text or "(no output)",
    }
    if output.cited and output.resume_points:
        # Hits as search_result blocks (citable), the lines around them as text; a model that does
        # not take search results gets them back as text when the request is built.
        head = output.text[: output.resume_points[0].at].strip()
        tail = output.text[output.cited_end :].strip()
        before = [{"type": "text", "text": head}] if head else []
        after = [{"type": "text", "text": tail}] if tail else []
        block["content"] = [*before, *output.cited, *after, *output.media]
    elif output.media:  # a result may carry images and documents next to its text
        block["content"] = [{"type": "text", "text": output.text or "(no output)"}, *output.media]
    if output.is_error:
        block["is_error"] = True
    return block
