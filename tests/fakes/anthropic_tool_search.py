"""The tool search tool as the Messages API documents it (platform.claude.com, "Tool search tool"),
for the fake server: checks, the search itself, and token counting of deferred definitions.

Request: tools may carry ``defer_loading: true`` only beside a tool search tool
(``{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}`` or the regex
variant), which itself is never deferred; at least one tool stays loaded. Answer: the model's
search is a ``server_tool_use`` block (``input: {"query": ...}``) followed in the same assistant
message by ``{"type": "tool_search_tool_result", "tool_use_id": ..., "content":
{"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference",
"tool_name": ...}]}}`` (or a ``tool_search_tool_result_error`` content). A reference loads that
deferred tool for the rest of the conversation; calling a deferred tool no reference loaded, or
referencing a tool that is not a deferred tool of the request, is refused. Deferred definitions
are not counted as input until loaded (then at the reference, inline).
"""

from __future__ import annotations

import math
import re
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from tests.fakes.anthropic_cache import count_tokens

if TYPE_CHECKING:
    from tests.fakes.anthropic import Reply

SEARCH_TOOLS = {
    "tool_search_tool_bm25_20251119": "tool_search_tool_bm25",
    "tool_search_tool_bm25": "tool_search_tool_bm25",
    "tool_search_tool_regex_20251119": "tool_search_tool_regex",
    "tool_search_tool_regex": "tool_search_tool_regex",
}
RESULT_TYPES = ("tool_search_tool_search_result", "tool_search_tool_result_error")
ERROR_CODES = ("invalid_tool_input", "unavailable", "too_many_requests", "execution_time_exceeded")
MAX_RESULTS = 5
MAX_PATTERN_CHARS = 200


def _is_search(tool: dict[str, Any]) -> bool:
    return tool.get("type") in SEARCH_TOOLS


def _deferred(tools: list[Any]) -> dict[str, dict[str, Any]]:
    return {
        str(t.get("name")): t
        for t in tools
        if isinstance(t, dict) and t.get("defer_loading") is True and not _is_search(t)
    }


def tool_search_problems(body: dict[str, Any]) -> list[str]:
    """What the API refuses about deferred tools, the search tool and tool references."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    problems: list[str] = []
    if tools and all(t.get("defer_loading") is True for t in tools):
        problems.append("All tools have defer_loading set. At least one tool must be non-deferred.")
    searches = [t for t in tools if _is_search(t)]
    for index, tool in enumerate(tools):
        if "defer_loading" in tool and not isinstance(tool["defer_loading"], bool):
            problems.append(f"tools.{index}.defer_loading: Input should be a valid boolean")
        if _is_search(tool):
            if tool.get("name") != SEARCH_TOOLS[str(tool["type"])]:
                problems.append(f"tools.{index}.name: must be {SEARCH_TOOLS[str(tool['type'])]!r}")
            if tool.get("defer_loading"):
                problems.append(f"tools.{index}: the tool search tool itself cannot have defer_loading set")
    deferred = _deferred(tools)
    if deferred and not searches:
        problems.append(
            "tools: defer_loading requires a tool search tool (tool_search_tool_regex or "
            "tool_search_tool_bm25) in the request"
        )
    search_names = {str(t.get("name")) for t in searches}
    loaded: set[str] = set()
    for m_index, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for b_index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            where = f"messages.{m_index}.content.{b_index}"
            kind = block.get("type")
            if kind == "server_tool_use" and str(block.get("name")).startswith("tool_search_tool_"):
                if block.get("name") not in search_names:
                    problems.append(f"{where}: server_tool_use of {block.get('name')}, which is not in tools")
                tool_input = block.get("input")
                if not isinstance(tool_input, dict) or not isinstance(tool_input.get("query"), str):
                    problems.append(f"{where}.input.query: Field required")
            elif kind == "tool_search_tool_result":
                problems.extend(_result_problems(where, block, deferred, loaded))
            elif kind == "tool_result" and isinstance(block.get("content"), list):
                problems.extend(_client_reference_problems(where, block["content"], deferred, loaded))
            elif kind == "tool_use" and block.get("name") in deferred and block.get("name") not in loaded:
                problems.append(
                    f"{where}: tool_use of deferred tool {block.get('name')!r}, which no tool_reference "
                    "loaded earlier in the conversation"
                )
    return problems


def _reference_problems(
    where: str, ref: Any, deferred: dict[str, dict[str, Any]], loaded: set[str]
) -> list[str]:
    if not isinstance(ref, dict) or ref.get("type") != "tool_reference":
        return [f"{where}: must be a tool_reference block"]
    extra = set(ref) - {"type", "tool_name", "cache_control"}
    if extra:
        return [f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted"]
    name = ref.get("tool_name")
    if not isinstance(name, str) or not name:
        return [f"{where}.tool_name: Field required (a non-empty string)"]
    if name not in deferred:
        return [f"{where}: tool_reference to {name!r}, which is not a deferred tool of this request"]
    loaded.add(name)
    return []


def _result_problems(
    where: str, block: dict[str, Any], deferred: dict[str, dict[str, Any]], loaded: set[str]
) -> list[str]:
    extra = set(block) - {"type", "tool_use_id", "content", "cache_control"}
    if extra:
        return [f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted"]
    if not isinstance(block.get("tool_use_id"), str):
        return [f"{where}.tool_use_id: Field required"]
    content = block.get("content")
    if not isinstance(content, dict) or content.get("type") not in RESULT_TYPES:
        return [f"{where}.content: must be a tool_search_tool_search_result or tool_search_tool_result_error"]
    if content["type"] == "tool_search_tool_result_error":
        if content.get("error_code") not in ERROR_CODES:
            return [f"{where}.content.error_code: must be one of {', '.join(ERROR_CODES)}"]
        return []
    if set(content) != {"type", "tool_references"} or not isinstance(content["tool_references"], list):
        return [f"{where}.content.tool_references: Field required (a list, and nothing else)"]
    problems: list[str] = []
    for index, ref in enumerate(content["tool_references"]):
        problems.extend(
            _reference_problems(f"{where}.content.tool_references.{index}", ref, deferred, loaded)
        )
    return problems


def _client_reference_problems(
    where: str, content: list[Any], deferred: dict[str, dict[str, Any]], loaded: set[str]
) -> list[str]:
    problems: list[str] = []
    for index, inner in enumerate(content):
        if isinstance(inner, dict) and inner.get("type") == "tool_reference":
            problems.extend(_reference_problems(f"{where}.content.{index}", inner, deferred, loaded))
    return problems


def as_counted(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the API counts its input: deferred definitions left out of ``tools``, and each
    loaded one counted where the search result that loaded it stands."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return body
    deferred = _deferred(tools)
    if not deferred:
        return body
    messages: list[Any] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_search_tool_result" for b in content
        ):
            content = [_with_loaded(b, deferred) for b in content]
            message = {**message, "content": content}
        messages.append(message)
    loaded = [t for t in tools if not (isinstance(t, dict) and t.get("name") in deferred)]
    return {**body, "tools": loaded, "messages": messages}


def _with_loaded(block: Any, deferred: dict[str, dict[str, Any]]) -> Any:
    if not isinstance(block, dict) or block.get("type") != "tool_search_tool_result":
        return block
    content = block.get("content")
    refs = content.get("tool_references") if isinstance(content, dict) else None
    names = [r.get("tool_name") for r in refs or [] if isinstance(r, dict)]
    return {**block, "loaded": [deferred[n] for n in names if n in deferred]}


def definition_tokens(body: dict[str, Any]) -> int:
    """Tokens the fake counts for a request's tool definitions up front (deferred ones excluded)."""
    counted = as_counted(body)
    return count_tokens(counted) - count_tokens({**counted, "tools": []})


def _searchable(tool: dict[str, Any]) -> str:
    """Name, description, argument names and argument descriptions, as the search reads them."""
    schema = tool.get("input_schema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    args = [
        f"{name} {spec.get('description', '')}" if isinstance(spec, dict) else str(name)
        for name, spec in (props or {}).items()
    ]
    return " ".join([str(tool.get("name", "")), str(tool.get("description", "")), *args])


def _terms(text: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", text.lower()) if t]


def search(body: dict[str, Any], query: str) -> list[str]:
    """The deferred tools of ``body`` a search for ``query`` finds (at most five, best first):
    Python ``re.search`` over the searchable text for the regex variant, BM25 for the other."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    deferred = _deferred(tools)
    variant = next((SEARCH_TOOLS[str(t["type"])] for t in tools if _is_search(t)), None)
    if variant is None:
        raise ValueError("the request has no tool search tool")
    if variant == "tool_search_tool_regex":
        if len(query) > MAX_PATTERN_CHARS:
            return []
        pattern = re.compile(query)
        return [name for name, tool in deferred.items() if pattern.search(_searchable(tool))][:MAX_RESULTS]
    docs = {name: _terms(_searchable(tool)) for name, tool in deferred.items()}
    if not docs:
        return []
    average = sum(len(d) for d in docs.values()) / len(docs)
    frequency = Counter(term for d in docs.values() for term in set(d))
    scores: dict[str, float] = {}
    for name, doc in docs.items():
        counts = Counter(doc)
        score = 0.0
        for term in set(_terms(query)):
            if term not in counts:
                continue
            idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            tf = counts[term]
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / average))
        if score > 0:
            scores[name] = score
    return sorted(scores, key=lambda n: (-scores[n], n))[:MAX_RESULTS]


def tool_search_reply(
    body: dict[str, Any], query: str, *, call: dict[str, Any] | None = None, text: str | None = None
) -> Reply:
    """The model searches for ``query`` (the search runs over ``body``'s deferred tools); with
    ``call``, it then calls the best match with that input in the same answer."""
    from tests.fakes.anthropic import Reply  # the server module imports this one

    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    name = next(SEARCH_TOOLS[str(t["type"])] for t in tools if _is_search(t))
    use_id = f"srvtoolu_{uuid.uuid4().hex[:24]}"
    found = search(body, query)
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "server_tool_use", "id": use_id, "name": name, "input": {"query": query}},
        {
            "type": "tool_search_tool_result",
            "tool_use_id": use_id,
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": n} for n in found],
            },
        },
    ]
    if call is None or not found:
        summary = f"found: {', '.join(found) or 'nothing'}"
        return Reply([*content, {"type": "text", "text": summary}])
    use = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": found[0], "input": call}
    return Reply([*content, use], "tool_use")


def loaded_definitions(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool definitions of ``body`` that are in the prompt up front."""
    return [t for t in body.get("tools") or [] if isinstance(t, dict) and not t.get("defer_loading")]
