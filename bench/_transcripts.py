"""Seeded transcripts of a coding-agent conversation with realistic tool outputs, in our shape
(:class:`agent.types.ChatMessage`) and in the OpenAI chat shape Hermes Agent takes.

A round is a user request, 0-3 tool rounds of 1-3 calls each (reading files, running tests,
listing directories, searching, fetching JSON, git log), then a plain answer. Outputs vary from a
few lines to tens of kilobytes, as they do; a file is sometimes read twice (identical output),
and a file is sometimes written (a large tool input).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.types import ChatMessage, ContentBlock, text_block

_WORDS = [
    *("session", "store", "message", "compaction", "summary", "archive", "token", "window", "request"),
    *("worker", "lease", "inbox", "outbox", "delivery", "platform", "adapter", "handler", "config"),
    *("retry", "backoff", "timeout", "cursor", "index", "query", "result", "row", "column"),
]
_DIRS = ("gateway", "agent", "tests", "gateway/store", "agent/tools", "docs", "migrations/versions")
_REQUESTS = (
    "please check why the deploy of {x} failed last night",
    "can you read {f} and tell me what the retry logic does?",
    "run the tests for {x} and fix whatever fails",
    "what changed in {f} since yesterday?",
    "the {x} worker keeps timing out, find out why",
    "add a --dry-run flag to the {x} command",
    "we must never log the api key; make sure {f} does not",
    "list the migrations and check the latest one applies on PostgreSQL",
)


def _ident(rng: random.Random) -> str:
    return "_".join(rng.sample(_WORDS, rng.randint(1, 3)))


def _path(rng: random.Random) -> str:
    return f"{rng.choice(_DIRS)}/{_ident(rng)}.py"


def _source(rng: random.Random, lines: int) -> str:
    out = ['"""' + " ".join(rng.choices(_WORDS, k=12)) + '."""', "", "from __future__ import annotations", ""]
    while len(out) < lines:
        name = _ident(rng)
        out.append(f"def {name}({_ident(rng)}: int, {_ident(rng)}: str | None = None) -> bool:")
        out.append(f'    """{" ".join(rng.choices(_WORDS, k=rng.randint(5, 14))).capitalize()}."""')
        for _ in range(rng.randint(2, 12)):
            depth = "    " * rng.randint(1, 3)
            out.append(f"{depth}{_ident(rng)} = {_ident(rng)}({_ident(rng)}, {rng.randint(0, 999)})")
        out += [f"    return {_ident(rng)} is not None", ""]
    return "\n".join(f"{i + 1:>5}\t{line}" for i, line in enumerate(out[:lines]))


def _pytest(rng: random.Random, tests: int) -> str:
    failed = rng.choice([0, 0, 1, 3])
    lines = ["============================= test session starts =============================="]
    lines.append("platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0")
    lines.append(f"collected {tests} items")
    for _ in range(max(1, tests // 40)):
        lines.append(f"tests/test_{_ident(rng)}.py " + "".join(rng.choices("..........F", k=40)))
    for _ in range(failed):
        lines.append(f"___________________ test_{_ident(rng)} ___________________")
        lines.append("Traceback (most recent call last):")
        for _ in range(rng.randint(3, 8)):
            lines.append(f'  File "/srv/app/{_path(rng)}", line {rng.randint(1, 900)}, in {_ident(rng)}')
            lines.append(f"    {_ident(rng)} = {_ident(rng)}({_ident(rng)})")
        lines.append(f"AssertionError: expected {rng.randint(1, 99)} rows, got {rng.randint(1, 99)}")
    lines.append(f"==== {failed} failed, {tests - failed} passed in {rng.uniform(0.5, 40):.2f}s ====")
    lines.append(f"exit code {1 if failed else 0}")
    return "\n".join(lines)


def _ls(rng: random.Random, entries: int) -> str:
    lines = [f"total {entries * 8}"]
    for _ in range(entries):
        lines.append(
            f"-rw-r--r-- 1 app app {rng.randint(80, 90_000):>6} Nov {rng.randint(1, 30):>2} "
            f"{rng.randint(0, 23):02}:{rng.randint(0, 59):02} "
            f"{_ident(rng)}.{rng.choice(['py', 'md', 'json'])}"
        )
    return "\n".join(lines)


def _grep(rng: random.Random, hits: int) -> str:
    return "\n".join(
        f"{_path(rng)}:{rng.randint(1, 800)}:    {_ident(rng)} = {_ident(rng)}({_ident(rng)})"
        for _ in range(hits)
    )


def _json(rng: random.Random, records: int) -> str:
    rows = [
        {
            "id": rng.randint(1, 10**9),
            "name": _ident(rng),
            "status": rng.choice(["ok", "failed", "pending"]),
            "updated_at": f"2026-11-{rng.randint(1, 30):02}T{rng.randint(0, 23):02}:00:00Z",
            "tags": rng.sample(_WORDS, 3),
            "detail": " ".join(rng.choices(_WORDS, k=rng.randint(4, 20))),
        }
        for _ in range(records)
    ]
    return json.dumps({"results": rows, "count": records}, indent=2)


def _git_log(rng: random.Random, commits: int) -> str:
    return "\n".join(
        f"commit {rng.getrandbits(160):040x}\nAuthor: dev <dev@example.com>\n"
        f"Date:   Mon Nov {rng.randint(1, 30)} 12:00:00 2026\n\n    {' '.join(rng.choices(_WORDS, k=8))}\n"
        for _ in range(commits)
    )


# name -> (input maker, output maker); the output's size is drawn per call.
_TOOLS: dict[str, tuple[Callable[[random.Random], dict[str, Any]], Callable[[random.Random, int], str]]] = {
    "read_file": (lambda r: {"path": _path(r)}, lambda r, n: _source(r, n)),
    "terminal": (lambda r: {"command": "pytest -q tests/" + _ident(r)}, lambda r, n: _pytest(r, n)),
    "list_dir": (lambda r: {"command": f"ls -la {r.choice(_DIRS)}"}, lambda r, n: _ls(r, n // 4 + 1)),
    "search_files": (lambda r: {"pattern": _ident(r), "path": "."}, lambda r, n: _grep(r, n // 3 + 1)),
    "web_extract": (
        lambda r: {"url": f"https://api.example.com/{_ident(r)}"},
        lambda r, n: _json(r, n // 8 + 1),
    ),
    "git_log": (lambda r: {"command": "git log -n 20"}, lambda r, n: _git_log(r, n // 6 + 1)),
}


def _size(rng: random.Random) -> int:
    """Lines of output: mostly modest, sometimes large, now and then huge (a whole log or file)."""
    return rng.choice([3, 8, 20, 40, 40, 80, 120, 200, 400, 900])


def transcript(n: int, seed: int = 11) -> list[ChatMessage]:
    """``n`` persisted messages (ids and seq 1..n), seeded."""
    rng = random.Random(seed)
    out: list[ChatMessage] = []
    call = 0
    recent: list[tuple[str, dict[str, Any], str]] = []
    while len(out) < n:
        request = rng.choice(_REQUESTS).format(x=_ident(rng), f=_path(rng))
        out.append(ChatMessage.user(request + ("\n\n" + _source(rng, 12) if rng.random() < 0.1 else "")))
        for _ in range(rng.choice([0, 1, 1, 2, 2, 3])):
            uses: list[ContentBlock] = []
            results: list[ContentBlock] = []
            for _ in range(rng.choice([1, 1, 2, 3])):
                call += 1
                if recent and rng.random() < 0.15:  # the same file read again: identical output
                    name, args, body = rng.choice(recent)
                elif rng.random() < 0.08:  # a file written: the large part is the input
                    name, args, body = "write_file", {"path": _path(rng), "content": _source(rng, 150)}, "ok"
                else:
                    name = rng.choice(list(_TOOLS))
                    make_input, make_output = _TOOLS[name]
                    args, body = make_input(rng), make_output(rng, _size(rng))
                    recent = [*recent[-20:], (name, args, body)]
                uses.append({"type": "tool_use", "id": f"toolu_{call:06}", "name": name, "input": args})
                result: ContentBlock = {"type": "tool_result", "tool_use_id": f"toolu_{call:06}"}
                result["content"] = body
                if "failed" in body[-200:] and rng.random() < 0.3:
                    result["is_error"] = True
                results.append(result)
            thought = "Let me look at " + " and ".join(str(u["name"]) for u in uses) + "."
            out.append(ChatMessage(role="assistant", content=[text_block(thought), *uses]))
            out.append(ChatMessage(role="user", content=results))
        answer = " ".join(rng.choices(_WORDS, k=rng.randint(20, 160)))
        out.append(ChatMessage.assistant(f"Done: {answer}. Next I would check {_path(rng)}."))
    start = datetime(2026, 11, 1, tzinfo=UTC)
    return [
        replace(m, id=i + 1, seq=i + 1, created_at=start + timedelta(minutes=i))
        for i, m in enumerate(out[:n])
    ]


def to_openai(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """The same transcript as OpenAI chat messages (tool calls on the assistant, one ``tool``
    message per result), the shape Hermes Agent's compressor takes."""
    out: list[dict[str, Any]] = []
    for m in messages:
        texts = "\n".join(str(b.get("text", "")) for b in m.content if b.get("type") == "text")
        uses = [b for b in m.content if b.get("type") == "tool_use"]
        results = [b for b in m.content if b.get("type") == "tool_result"]
        if m.role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": texts}
            if uses:
                message["tool_calls"] = [
                    {
                        "id": u["id"],
                        "type": "function",
                        "function": {"name": u["name"], "arguments": json.dumps(u["input"])},
                    }
                    for u in uses
                ]
            out.append(message)
        elif results:
            out += [
                {"role": "tool", "tool_call_id": r["tool_use_id"], "content": r["content"]} for r in results
            ]
        else:
            out.append({"role": "user", "content": texts})
    return out
