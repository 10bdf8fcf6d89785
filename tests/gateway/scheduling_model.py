"""A fake model (responder for the fake Anthropic server) that sets reminders with the ``schedule`` tool.

- "remind me in N seconds: X" -> ``schedule`` create, ``at`` N seconds from now, prompt X
- "every N seconds: X" -> ``schedule`` create, ``every_seconds`` N, prompt X
- "cancel task ID" -> ``schedule`` cancel
- "schedule raw {json}" -> ``schedule`` with exactly that input
- a tool result -> "Done. <the tool's answer>"
- a scheduled run ("... Its instructions: X") -> "RUN: X"
- anything else -> "reply: <last line>"; summaries are answered as summaries.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.types import content_text
from tests.fakes.anthropic import Answer, last_user_text, summary_text, text_reply, tool_use_reply
from tests.gateway.conftest import is_summarizer_call

RUN_MARK = "Its instructions:"


def _last_user_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user" and isinstance(message.get("content"), list):
            return list(message["content"])
    return []


class SchedulingModel:
    """See the module docstring; ``runs`` records the scheduled runs it answered."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.tool_results: list[str] = []

    async def __call__(self, body: dict[str, Any]) -> Answer:
        if is_summarizer_call(body):
            return text_reply(summary_text(last_user_text(body)[-200:]))
        blocks = _last_user_blocks(body)
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            text = content_text(results)
            self.tool_results.append(text)
            return text_reply(f"Done. {text}")
        text = last_user_text(body)
        if RUN_MARK in text:
            instruction = text.split(RUN_MARK, 1)[1].strip()
            self.runs.append(instruction)
            return text_reply(f"RUN: {instruction}")
        if match := re.search(r"remind me in (\d+) seconds: (.+)", text):
            at = datetime.now(UTC) + timedelta(seconds=int(match.group(1)))
            return tool_use_reply(
                "schedule", {"action": "create", "prompt": match.group(2).strip(), "at": at.isoformat()}
            )
        if match := re.search(r"every (\d+) seconds: (.+)", text):
            every = int(match.group(1))
            return tool_use_reply(
                "schedule", {"action": "create", "prompt": match.group(2).strip(), "every_seconds": every}
            )
        if match := re.search(r"cancel task (\w+)", text):
            return tool_use_reply("schedule", {"action": "cancel", "id": match.group(1)})
        if match := re.search(r"schedule raw (\{.*\})", text):
            return tool_use_reply("schedule", json.loads(match.group(1)))
        last = text.strip().splitlines()[-1] if text.strip() else ""
        return text_reply(f"reply: {last.split('] ', 1)[-1][:80]}")


def task_id_in(text: str) -> str:
    """The id in "Done. Scheduled task 1a2b3c4d: ..."."""
    match = re.search(r"Scheduled task ([0-9a-f]{8})", text)
    assert match is not None, text
    return match.group(1)
