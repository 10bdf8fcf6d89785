"""An export read back is validated row by row before anything is written: a row the rest of the
service could not read is one clear line naming it, never a traceback and never a stored row."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from gateway.admin import import_rows
from gateway.admin.export import ExportFormatError, from_jsonl, to_jsonl
from gateway.store import models
from gateway.store.repository import Store
from tests.gateway.admin_support import seed


async def exported(store: Store) -> list[str]:
    seeded = await seed(store)
    return list(to_jsonl(await store.export_session(seeded.session_id)))


def first_message(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "message")


def with_message(lines: list[str], **change: object) -> list[str]:
    at = first_message(lines)
    row = json.loads(lines[at])
    row.update(change)
    return [*lines[:at], json.dumps(row) + "\n", *lines[at + 1 :]]


NESTED = "[" * 100_000 + "]" * 100_000
Mutation = Callable[[list[str]], list[str]]
MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "non-numeric seq": (lambda ls: with_message(ls, seq="seven"), "seq"),
    "seq 2**70": (lambda ls: with_message(ls, seq=2**70), "seq"),
    "float seq": (lambda ls: with_message(ls, seq=1.5), "seq"),
    "string content": (lambda ls: with_message(ls, content="just a string"), "content"),
    "text block without text": (lambda ls: with_message(ls, content=[{"type": "text"}]), "text"),
    "unknown role": (lambda ls: with_message(ls, role="system"), "role"),
    "naive time": (lambda ls: with_message(ls, created_at="2026-01-01T00:00:00"), "created_at"),
    "deeply nested json": (
        lambda ls: [*ls[:3], ls[3].replace('"content": [', f'"content": [{NESTED}, ', 1), *ls[4:]],
        "nested deeper",
    ),
    "deep but parseable": (
        lambda ls: with_message(ls, content=[{"type": "x", "v": json.loads("[" * 60 + "]" * 60)}]),
        "nested deeper",
    ),
    "lone surrogate": (
        lambda ls: [*ls[:-1], ls[-1].replace('"text": "', '"text": "\\ud800', 1)],
        "lone surrogate",
    ),
    "unknown compaction": (
        lambda ls: with_message(ls, compaction_id="nosuchcompaction"),
        "unknown compaction",
    ),
    "another session": (lambda ls: with_message(ls, session_id="someoneelse"), "another session"),
    "not an object": (lambda ls: [*ls, "[1, 2]\n"], "not a JSON object"),
    "two session lines": (lambda ls: [*ls, ls[0]], "one session line"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
async def test_a_bad_row_is_one_line_naming_its_line(store: Store, name: str) -> None:
    mutate, expected = MUTATIONS[name]
    lines = mutate(await exported(store))
    with pytest.raises(ExportFormatError) as caught:
        from_jsonl(lines)
    problems = str(caught.value).splitlines()
    assert len(problems) == 1, problems
    assert problems[0].startswith("line ") and expected in problems[0], problems[0]


async def test_every_bad_row_is_listed(store: Store) -> None:
    lines = await exported(store)
    at = first_message(lines)
    for i in (at, at + 1, at + 2):
        row = json.loads(lines[i])
        row["seq"] = "x"
        lines[i] = json.dumps(row) + "\n"
    with pytest.raises(ExportFormatError) as caught:
        from_jsonl(lines)
    assert [p.split(" ", 2)[1] for p in str(caught.value).splitlines()] == [
        str(at + 1),
        str(at + 2),
        str(at + 3),
    ]


async def test_a_good_export_reads_back_whole(store: Store) -> None:
    lines = await exported(store)
    data = from_jsonl(lines)
    assert len(data.messages) == sum(1 for line in lines if '"type": "message"' in line)


@pytest.mark.parametrize(
    ("table", "line"),
    [("sessions", "SessionLine"), ("compactions", "CompactionLine"), ("messages", "MessageLine")],
)
def test_every_exported_column_has_a_field_in_its_import_row(table: str, line: str) -> None:
    # A column added by a migration must be importable again, or an export stops round-tripping.
    columns = {c.name for c in getattr(models, table).c} - {"text_tsv"}
    assert columns - set(getattr(import_rows, line).model_fields) == set()
