"""``session_search``: ranked full-text search over THIS conversation, active and archived."""

from __future__ import annotations

from datetime import UTC

from agent.tools.base import JSONObject, ResumePoint, Tool, ToolContext, ToolOutput, snapshot_line
from agent.tools.citable import message_source, search_result
from agent.types import ContentBlock, SearchFilters, SearchHit, snippet_parts

DEFAULT_LIMIT = 10
MAX_LIMIT = 50
MAX_OFFSET = 1_000_000_000


def _hit_title(hit: SearchHit, own: str) -> str:
    if hit.session_id != own:
        state = "a sub-agent's run (delegate)"
    elif hit.compacted:
        state = f"archived, compaction {hit.compaction_id}" if hit.compaction_id else "archived"
    else:
        state = "active" if hit.active else "inactive"
    who = hit.role + (f" {hit.author_name}" if hit.author_name else "")
    when = hit.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    return f"#{hit.message_id} [{state}] {when} {who}"


def _hit_line(hit: SearchHit, own: str) -> str:
    snippet = "".join(f"⟦{text}⟧" if match else text for text, match in snippet_parts(hit.snippet))
    return f"{_hit_title(hit, own)}: {snippet}"


def _hit_block(hit: SearchHit, own: str) -> ContentBlock:
    # Cited text is quoted back verbatim: the snippet without match markers.
    snippet = "".join(text for text, _ in snippet_parts(hit.snippet))
    return search_result(message_source(hit.session_id, hit.message_id), _hit_title(hit, own), snippet)


SEARCH_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to look for."},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Matches to return."},
        "offset": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_OFFSET,
            "description": "Skip this many matches (paging).",
        },
    },
    "required": ["query"],
}


class SessionSearchTool(Tool):
    name = "session_search"
    description = (
        "Search this conversation's whole history, including parts summarized away, for words or "
        'phrases (words, "exact phrase", -exclude, prefix*). Returns ranked matches with message ids '
        "(#id); matches are marked ⟦like this⟧. Read archived messages in full with recall "
        "(from_id/to_id around a message id)."
    )
    input_schema = SEARCH_SCHEMA

    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        query = str(tool_input["query"]).strip()
        limit = int(tool_input.get("limit", DEFAULT_LIMIT))
        offset = int(tool_input.get("offset", 0))
        if not query:
            return ToolOutput.error("query is empty: give one or more words to search for")
        # The session filter is forced here, never taken from the input: one chat never sees another's.
        # The running turn's own messages (its question, this very call) are not what is looked for.
        # The chat's sub-agent runs (delegate) are part of its history: what they read is found too.
        filters = SearchFilters(session_id=ctx.session.id, before_id=ctx.turn_start_id, with_delegations=True)
        hits = await ctx.store.search(query, filters, limit=limit, offset=offset)
        lines = [snapshot_line(ctx.clock)]
        if not hits:
            lines.append(
                f"no matches for {query!r} in this conversation" + (" past offset" if offset else "")
            )
            return ToolOutput("\n".join(lines))
        lines.append(f"{len(hits)} matches for {query!r} (from #{offset + 1}), best first:")
        points: list[ResumePoint] = []
        length = sum(len(line) + 1 for line in lines)
        for index, hit in enumerate(hits):
            points.append(ResumePoint(length, {"query": query, "limit": limit, "offset": offset + index}))
            line = _hit_line(hit, ctx.session.id)
            lines.append(line)
            length += len(line) + 1
        end = length
        if len(hits) == limit:
            lines.append(f"more may match: call session_search with offset {offset + limit}")
        cited = tuple(_hit_block(hit, ctx.session.id) for hit in hits)
        return ToolOutput("\n".join(lines), resume_points=tuple(points), cited=cited, cited_end=end)
