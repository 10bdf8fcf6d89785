"""A deterministic, extractive summary: the fallback when the summarizer fails, and the offline
provider's summary. Same section headings as the model-written one, filled from the text itself.

Linear in the text whatever it holds: every pattern that can run along a long token starts
only where such a token starts (a lookbehind, not ``\b``, which holds at every character of
``a-a-a-…``) and has bounded repeats, and only the first :data:`SCAN_CHARS` characters of a
sentence are classified (an item shows its first 200 anyway). A pasted 32k-character blob
with no spaces is one "sentence"; unbounded, the e-mail pattern alone tried it from every
position (quadratic: seconds for three blobs).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from agent.prompts import (
    EMPTY_ITEM,
    PROGRESS_PARTS,
    SECTIONS,
    SNAPSHOT_CHARS,
    parse_sections,
    render_sections,
    task_snapshot,
)
from agent.tokens import estimate_text_tokens
from agent.types import ChatMessage

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_CONSTRAINT = re.compile(r"(?i)\b(must|never|always|don't|do not|prefer|avoid|only use|make sure|without)\b")
_DECISION = re.compile(
    r"(?i)\b(decided|decision|we'll|we will|let's|going with|chose|agreed|will use|plan is)\b"
)
_DONE = re.compile(
    r"(?i)\b(done|fixed|created|added|completed|finished|implemented|updated|saved|wrote|sent)\b"
)
_BLOCKED = re.compile(r"(?i)\b(error|failed|failure|blocked|cannot|can't|exception|traceback|denied)\b")
_REMAINING = re.compile(r"(?i)\b(todo|to do|next|remaining|still need|follow up|later)\b")
_FACT = re.compile(
    r"https?://\S{1,300}"
    r"|(?<![\w.~/-])(?:~|\.{1,2})?/[\w.\-]{1,255}(?:/[\w.\-]{1,255}){1,30}"
    r"|(?<![\w-])[\w\-]{1,100}\.(?:py|js|ts|json|ya?ml|toml|md|txt|csv|sql)\b"
    r"|(?<![A-Za-z0-9_])[A-Za-z]{1,40}[-_]?\d{2,20}[\w-]{0,40}"
    r"|(?<![\d,.:/-])\d[\d,.:/-]{0,40}\d\b"
    r"|(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}\.[\w.]{1,100}"
)
# Classified per sentence: the first this many characters (linear however long it is).
SCAN_CHARS = 2_000
# Past this many characters the summary is written in a worker thread.
OFFLOAD_CHARS = 50_000
_PER_SECTION = 12
_FACTS = 30
_ITEM_CHARS = 200


def _clip(text: str, limit: int = _ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _human_text(m: ChatMessage) -> str:
    """The words a person wrote: text blocks of a user message, tool results left out."""
    return "\n".join(str(b.get("text", "")) for b in m.content if b.get("type") == "text").strip()


def _sentences(text: str) -> list[str]:
    return [s.strip()[:SCAN_CHARS] for s in _SENTENCE.split(text) if len(s.strip()) > 3]


def _previous_items(previous: dict[str, str], name: str) -> list[str]:
    body = previous.get(name, "")
    return [line.strip() for line in body.splitlines() if line.strip() and line.strip() != EMPTY_ITEM]


class _Sections:
    """Ordered, de-duplicated items per section."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, None]] = {}

    def add(self, name: str, item: str) -> None:
        item = item if item.startswith(("- ", "### ")) else f"- {_clip(item)}"
        self.items.setdefault(name, {})[item] = None


def extractive_summary(
    messages: Sequence[ChatMessage],
    *,
    budget_tokens: int,
    previous_summary: str | None = None,
    archived: str = EMPTY_ITEM,
) -> str:
    """A summary of ``messages`` with every section heading, within about ``budget_tokens``."""
    previous = parse_sections(previous_summary) if previous_summary else {}
    out = _Sections()
    for name in SECTIONS:
        if name not in ("Progress", "Archived", "Active Task"):
            for item in _previous_items(previous, name):
                out.add(name, item)
    done: list[str] = []
    blocked: list[str] = []
    human_idx = [
        i for i, m in enumerate(messages) if m.role == "user" and m.kind == "message" and _human_text(m)
    ]
    humans = [messages[i] for i in human_idx]
    human_set = set(human_idx)
    answers = _next_answers(messages)
    if "Goal" not in out.items and humans:
        out.add("Goal", _human_text(humans[0]))

    for index, m in enumerate(messages):
        if m.kind == "summary":
            continue
        text = _human_text(m) if m.role == "user" else m.text
        for sentence in _sentences(text):
            if m.role == "user" and _CONSTRAINT.search(sentence):
                out.add("Constraints & Preferences", sentence)
            if _DECISION.search(sentence):
                out.add("Key Decisions", sentence)
            if m.role == "assistant" and _DONE.search(sentence):
                done.append(sentence)
            if _BLOCKED.search(sentence):
                blocked.append(sentence)
            if _REMAINING.search(sentence):
                out.add("Remaining Work", sentence)
            if _FACT.search(sentence):
                out.add("Key Facts", sentence)
        if index in human_set:
            _questions(out, m, answers[index])
        for block in m.content:
            if block.get("type") == "tool_use":
                done.append(f"called {block.get('name')} (id {block.get('id')})")
            elif block.get("type") == "tool_result" and block.get("is_error"):
                blocked.append(f"tool {block.get('tool_use_id')} returned an error")

    if not humans:
        for item in _previous_items(previous, "Active Task"):
            out.add("Active Task", item)
    else:
        out.add("Active Task", task_snapshot(_human_text(humans[-1]), min(SNAPSHOT_CHARS, 2 * budget_tokens)))
    progress = {
        "Done": [*_previous_part(previous, "Done"), *(f"- {_clip(s)}" for s in done)],
        "In Progress": _previous_part(previous, "In Progress"),
        "Blocked": [*_previous_part(previous, "Blocked"), *(f"- {_clip(s)}" for s in blocked)],
    }
    return _render({k: list(v) for k, v in out.items.items()}, progress, archived, budget_tokens)


async def extractive_summary_off_loop(
    messages: Sequence[ChatMessage], *, budget_tokens: int, previous_summary: str | None = None
) -> str:
    """:func:`extractive_summary`, in a worker thread when the text is big (it is linear, but a
    few hundred thousand characters still take a while): the event loop keeps serving."""
    if sum(len(m.text) for m in messages) < OFFLOAD_CHARS:
        return extractive_summary(messages, budget_tokens=budget_tokens, previous_summary=previous_summary)
    return await asyncio.to_thread(
        extractive_summary, list(messages), budget_tokens=budget_tokens, previous_summary=previous_summary
    )


def _next_answers(messages: Sequence[ChatMessage]) -> list[ChatMessage | None]:
    """For each index, the first later assistant message that says something in words."""
    answers: list[ChatMessage | None] = [None] * len(messages)
    following: ChatMessage | None = None
    for index in range(len(messages) - 1, -1, -1):
        answers[index] = following
        m = messages[index]
        if m.role == "assistant" and _human_text(m):
            following = m
    return answers


def _questions(out: _Sections, m: ChatMessage, answer: ChatMessage | None) -> None:
    for sentence in _sentences(_human_text(m)):
        if not sentence.endswith(("?", "？")):
            continue
        if answer is None:
            out.add("Pending Questions", sentence)
        else:
            first = _sentences(_human_text(answer))
            out.add("Resolved Questions", f"{_clip(sentence, 150)} → {_clip(first[0] if first else '', 150)}")


def _previous_part(previous: dict[str, str], part: str) -> list[str]:
    """Items under ``### part`` of the previous summary's Progress section."""
    items: list[str] = []
    current = None
    for line in previous.get("Progress", "").splitlines():
        stripped = line.strip()
        if stripped.startswith("###"):
            current = stripped.lstrip("#").strip()
        elif current == part and stripped and stripped != EMPTY_ITEM:
            items.append(stripped)
    return items


def _render(items: dict[str, list[str]], progress: dict[str, list[str]], archived: str, budget: int) -> str:
    """Keep the most recent items of each list (Goal keeps its first) until the text fits ``budget``."""
    lists: dict[str, list[str]] = {name: list(dict.fromkeys(v)) for name, v in items.items()}
    for part, values in progress.items():
        lists[f"Progress/{part}"] = list(dict.fromkeys(values))
    for name, values in lists.items():
        cap = _FACTS if name == "Key Facts" else (1 if name in ("Goal", "Active Task") else _PER_SECTION)
        lists[name] = values[:cap] if name == "Goal" else values[-cap:]
    fixed = estimate_text_tokens(archived) + 120  # headings and framing
    costs = {name: [estimate_text_tokens(v) + 1 for v in values] for name, values in lists.items()}
    total = fixed + sum(sum(c) for c in costs.values())
    protected = ("Goal", "Active Task")
    while total > budget:
        trimmable = [n for n in lists if lists[n] and n not in protected]
        if not trimmable:
            break
        longest = max(trimmable, key=lambda n: sum(costs[n]))
        lists[longest].pop(0)
        total -= costs[longest].pop(0)
    sections = {name: "\n".join(values) for name, values in lists.items() if "/" not in name}
    sections["Progress"] = "\n".join(
        f"### {part}\n" + ("\n".join(lists[f"Progress/{part}"]) or EMPTY_ITEM) for part in PROGRESS_PARTS
    )
    sections["Archived"] = archived
    return render_sections(sections)
