"""``recall``: archived (summarized-away) messages of this conversation, verbatim, paged."""

from __future__ import annotations

from datetime import UTC

from agent.errors import ToolError
from agent.tools.base import JSONObject, ResumePoint, Tool, ToolContext, ToolOutput, snapshot_line
from agent.tools.citable import message_source, search_result
from agent.types import ChatMessage

DEFAULT_LIMIT = 10
MAX_LIMIT = 50
MAX_OFFSET = 1_000_000_000


MAX_MEDIA = 3  # images or PDFs returned by one recall, to keep one result within request limits


def _header(message: ChatMessage) -> str:
    who = message.role + (f" {message.author_name}" if message.author_name else "")
    when = f" {message.created_at.astimezone(UTC):%Y-%m-%d %H:%M}" if message.created_at else ""
    kind = f" ({message.kind})" if message.kind != "message" else ""
    return f"--- #{message.id} {who}{when}{kind}"


RECALL_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "compaction_id": {"type": "string", "description": "Only messages this compaction archived."},
        "from_id": {"type": "integer", "minimum": 0, "description": "First message id (inclusive)."},
        "to_id": {"type": "integer", "minimum": 0, "description": "Last message id (inclusive)."},
        "offset": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_OFFSET,
            "description": "Where to start (next_offset).",
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Page size."},
    },
    "required": [],
}


class RecallTool(Tool):
    name = "recall"
    description = (
        "Read archived messages of this conversation verbatim (the parts a summary replaced). Choose them "
        "by compaction_id, or by a message id range from_id..to_id (ids from session_search); with neither, "
        "pages through everything archived. Paged: pass next_offset from the previous page as offset."
    )
    input_schema = RECALL_SCHEMA

    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        from_id = tool_input.get("from_id")
        to_id = tool_input.get("to_id")
        if from_id is not None and to_id is not None and from_id > to_id:
            raise ToolError(f"from_id {from_id} is after to_id {to_id}")
        offset = int(tool_input.get("offset", 0))
        limit = int(tool_input.get("limit", DEFAULT_LIMIT))
        page = await ctx.store.recall(
            ctx.session.id,
            compaction_id=tool_input.get("compaction_id"),
            from_id=from_id,
            to_id=to_id,
            offset=offset,
            limit=limit,
        )
        lines = [snapshot_line(ctx.clock)]
        if not page.messages:
            lines.append(f"no archived messages match (total {page.total}, offset {offset})")
            lines.append("next_offset: none")
            return ToolOutput("\n".join(lines))
        last = offset + len(page.messages)
        lines.append(f"archived messages {offset + 1}-{last} of {page.total}, verbatim:")
        points: list[ResumePoint] = []
        length = sum(len(line) + 1 for line in lines)
        for index, message in enumerate(page.messages):
            points.append(ResumePoint(length, {**tool_input, "offset": offset + index}))
            block = f"{_header(message)}\n{message.text}"
            lines.append(block)
            length += len(block) + 1
        end = length
        cited = tuple(
            search_result(message_source(ctx.session.id, m.id), _header(m).removeprefix("--- "), m.text)
            for m in page.messages
        )
        if page.next_offset is None:
            lines.append("next_offset: none (end)")
        else:
            lines.append(f"next_offset: {page.next_offset}")
        media = [b for m in page.messages for b in m.content if b.get("type") in ("image", "document")]
        if len(media) > MAX_MEDIA:
            lines.append(
                f"({len(media) - MAX_MEDIA} more images/documents on this page: recall them one by one)"
            )
        return ToolOutput(
            "\n".join(lines),
            resume_points=tuple(points),
            media=tuple(media[:MAX_MEDIA]),
            cited=cited,
            cited_end=end,
        )
