"""Reading a session export back: every line checked against a typed model of its row kind before
anything is written.

A file from elsewhere is untrusted: a row that the store would take but the rest of the service
could not read (a ``seq`` that is not a number, ``content`` that is a string) would break that
session's API, page and export for good. So each line is parsed with a bounded depth, every
string must be valid Unicode (no lone surrogates), every number must fit its column, and the rows
must hold together (one session, references to compactions and messages that exist). Every bad row
is reported, one line each; the import writes nothing unless all of them are good.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from gateway.store.export_ops import SessionExport

FORMAT = "hygieia-session/1"
MAX_DEPTH = 32
"""Nesting a content block may have (a real one has 4 or 5)."""
MAX_PROBLEMS = 50
"""Bad rows reported before the rest are counted only."""

Int32 = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]
Count = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
RowId = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]
Id = Annotated[StrictStr, Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")]
Str64 = Annotated[StrictStr, Field(max_length=64)]
Str128 = Annotated[StrictStr, Field(max_length=128)]
Str255 = Annotated[StrictStr, Field(max_length=255)]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Block(BaseModel):
    """One content block: a ``type``, and the fields of that type (a text block's ``text``)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Annotated[StrictStr, Field(min_length=1, max_length=64)]

    @model_validator(mode="after")
    def _text(self) -> Block:
        if self.type == "text" and not isinstance((self.model_extra or {}).get("text"), str):
            raise ValueError("a text block needs a string 'text'")
        return self


class SessionLine(_Row):
    id: Id
    key: Annotated[StrictStr, Field(min_length=1, max_length=255)]
    platform: Annotated[StrictStr, Field(min_length=1, max_length=32)]
    chat_id: Str128
    thread_id: Str128 | None = None
    user_id: Str128 | None = None
    system_prompt: StrictStr
    model: Str128
    created_at: AwareDatetime
    last_activity_at: AwareDatetime
    ended_at: AwareDatetime | None = None
    end_reason: Str64 | None = None
    last_prompt_tokens: Count | None = None
    last_prompt_at: AwareDatetime | None = None
    compaction_count: Count = 0
    context_state: dict[str, Any] | None = None
    version: Count = 1
    view_version: Count = 0
    chat_overrides: dict[str, Any] | None = None
    parent_session_id: Id | None = None


class CompactionLine(_Row):
    id: Id
    session_id: Id
    number: Count
    trigger: Literal["hygiene", "in_loop", "reactive", "manual", "scheduled"]
    status: Literal["ok", "fallback", "failed"]
    archived_from_seq: Int32 | None = None
    archived_to_seq: Int32 | None = None
    messages_archived: Count
    first_kept_id: RowId | None = None
    summary_message_id: RowId | None = None
    tokens_before: Count
    tokens_after: Count
    model: Str128
    duration_ms: Count
    focus: StrictStr | None = None
    created_at: AwareDatetime
    restored_at: AwareDatetime | None = None
    strategy: Annotated[StrictStr, Field(min_length=1, max_length=32)] = "summary"


class MessageLine(_Row):
    id: RowId
    session_id: Id
    seq: Int32
    sub_seq: Int32 = 0
    role: Literal["user", "assistant"]
    content: list[Block]
    text: StrictStr = ""
    kind: Literal["message", "summary", "notice"] = "message"
    author_id: Str128 | None = None
    author_name: Str255 | None = None
    platform_message_id: Str128 | None = None
    token_estimate: Count | None = None
    created_at: AwareDatetime
    active: StrictBool
    compacted: StrictBool = False
    compaction_id: Id | None = None
    produced_by: Id | None = None
    edited_at: AwareDatetime | None = None
    original_content: list[Block] | None = None
    search_cjk: StrictStr | None = None


_MODELS: dict[str, type[_Row]] = {
    "session": SessionLine,
    "compaction": CompactionLine,
    "message": MessageLine,
}


class ImportProblems(ValueError):
    """The rows that are not good, one line each (with their line numbers)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def _bad_json(value: Any) -> str | None:
    """Why a parsed value cannot be stored: too deep, or a string that is not valid Unicode."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string holds a lone surrogate (not valid Unicode)"
        elif isinstance(item, dict):
            stack += [(k, depth + 1) for k in item]
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return None


def _load(raw: str) -> dict[str, Any]:
    try:
        row = json.loads(raw)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise ValueError(f"not a session export (not JSON: {exc})") from None
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    problem = _bad_json(row)
    if problem:
        raise ValueError(problem)
    return row


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(p) for p in error.get("loc", ())) or "row"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_rows(lines: Iterable[str]) -> tuple[SessionLine, list[CompactionLine], list[MessageLine]]:
    """Every line validated; ImportProblems listing each bad row (and what does not hold together)."""
    problems: list[str] = []
    session: SessionLine | None = None
    done: list[CompactionLine] = []
    said: list[MessageLine] = []
    where: dict[int, int] = {}  # id(row) -> line number
    rows = 0
    for number, raw in enumerate(lines, 1):
        if len(problems) >= MAX_PROBLEMS:
            problems.append("... more bad rows not listed")
            break
        if not raw.strip():
            continue
        rows += 1
        kind: object = None
        try:
            row = _load(raw)
            kind = row.pop("type", None)
            model = _MODELS.get(kind) if isinstance(kind, str) else None
            if model is None:
                raise ValueError("'type' must be session, compaction or message")
            if (kind == "session") != (rows == 1):
                raise ValueError("a session export has one session line, first")
            if kind == "session" and row.pop("format", None) != FORMAT:
                raise ValueError(f"expected format {FORMAT}")
            parsed = model.model_validate(row)
        except ValidationError as exc:
            problems.append(f"line {number} ({kind}): {_describe(exc)}")
            continue
        except ValueError as exc:
            problems.append(f"line {number}: {exc}")
            continue
        where[id(parsed)] = number
        if isinstance(parsed, SessionLine):
            session = parsed
        elif isinstance(parsed, CompactionLine):
            done.append(parsed)
        elif isinstance(parsed, MessageLine):
            said.append(parsed)
    if session is None and not problems:
        problems.append("no session line: not a session export")
    if session is not None and not problems:  # references into bad rows would only repeat them
        problems += _coherence(session, done, said, where)
    if problems:
        raise ImportProblems(problems)
    assert session is not None
    return session, done, said


def _coherence(
    session: SessionLine, done: list[CompactionLine], said: list[MessageLine], where: dict[int, int]
) -> list[str]:
    problems: list[str] = []
    known = {c.id for c in done}
    message_ids: set[int] = set()
    places: set[tuple[int, int]] = set()
    for c in done:
        if c.session_id != session.id:
            problems.append(f"line {where[id(c)]}: compaction {c.id} belongs to another session")
    for m in said:
        line = where[id(m)]
        if m.session_id != session.id:
            problems.append(f"line {line}: message {m.id} belongs to another session")
        for ref in (m.compaction_id, m.produced_by):
            if ref is not None and ref not in known:
                problems.append(f"line {line}: message {m.id} names an unknown compaction {ref}")
        if m.id in message_ids:
            problems.append(f"line {line}: message id {m.id} appears twice")
        if (m.seq, m.sub_seq) in places:
            problems.append(f"line {line}: two messages at seq {m.seq}.{m.sub_seq}")
        message_ids.add(m.id)
        places.add((m.seq, m.sub_seq))
    for c in done:
        for row_id in (c.summary_message_id, c.first_kept_id):
            if row_id is not None and row_id not in message_ids:
                problems.append(f"line {where[id(c)]}: compaction {c.id} names an unknown message {row_id}")
    return problems


def to_export(session: SessionLine, done: list[CompactionLine], said: list[MessageLine]) -> SessionExport:
    """The validated rows as the store's export shape."""
    return SessionExport(
        session=session.model_dump(),
        compactions=[c.model_dump() for c in done],
        messages=[m.model_dump() for m in said],
    )
