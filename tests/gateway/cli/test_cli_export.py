"""``hygieia sessions export`` and ``import``, as an operator runs them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gateway.store.db import Database
from gateway.store.repository import Store
from tests.gateway.cli.test_cli import _seed, env, hygieia

__all__ = ["env"]


async def _active_texts(url: str, session_id: str) -> list[str]:
    async with Database(url) as db:
        return [m.text for m in await Store(db).load_active(session_id)]


def test_export_then_import_into_a_fresh_database_gives_the_same_active_view(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert hygieia("migrate", env=env).returncode == 0
    url = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'hygieia.db'}"
    session_id, _ = asyncio.run(_seed(url))
    out = tmp_path / "session.jsonl"
    exported = hygieia("sessions", "export", session_id, "--format", "jsonl", "-o", str(out), env=env)
    assert exported.returncode == 0, exported.stderr
    markdown = hygieia("sessions", "export", session_id, "--format", "md", env=env)
    assert markdown.returncode == 0 and "# console:alice" in markdown.stdout and "zanzibar" in markdown.stdout

    other = {**env, "HYGIEIA_DATA_DIR": str(tmp_path / "other")}
    assert hygieia("migrate", env=other).returncode == 0
    imported = hygieia("sessions", "import", str(out), "--json", env=other)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout) == {"session_id": session_id, "messages": 6}
    fresh = f"sqlite+aiosqlite:///{tmp_path / 'other' / 'hygieia.db'}"
    assert asyncio.run(_active_texts(fresh, session_id)) == asyncio.run(_active_texts(url, session_id))

    again = hygieia("sessions", "import", str(out), env=other)
    assert (
        again.returncode == 1
        and "already in this database" in again.stderr
        and "Traceback" not in again.stderr
    )


def test_bad_export_and_import_arguments_are_one_line_errors(env: dict[str, str], tmp_path: Path) -> None:
    assert hygieia("migrate", env=env).returncode == 0
    bad_format = hygieia("sessions", "export", "x", "--format", "pdf", env=env)
    assert bad_format.returncode == 2 and "jsonl or md" in bad_format.stderr
    unknown = hygieia("sessions", "export", "nosuch", env=env)
    assert unknown.returncode == 1 and "no session" in unknown.stderr
    junk = tmp_path / "junk.jsonl"
    junk.write_text("hello\n")
    assert "line 1: not a session export" in hygieia("sessions", "import", str(junk), env=env).stderr
    missing = hygieia("sessions", "import", str(tmp_path / "none.jsonl"), env=env)
    assert missing.returncode == 1 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr


def test_import_names_each_bad_row_writes_nothing_and_refuses_a_live_chat_without_replace(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert hygieia("migrate", env=env).returncode == 0
    url = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'hygieia.db'}"
    session_id, _ = asyncio.run(_seed(url))
    out = tmp_path / "session.jsonl"
    assert hygieia("sessions", "export", session_id, "-o", str(out), env=env).returncode == 0
    lines = out.read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    rows[0]["id"] = "f" * 32
    renamed = {r["id"]: f"{n:032d}" for n, r in enumerate(rows) if r["type"] == "compaction"}
    for row in rows[1:]:
        row["session_id"] = "f" * 32
        for ref in ("id", "compaction_id", "produced_by"):
            if isinstance(row.get(ref), str):
                row[ref] = renamed.get(row[ref], row[ref])
    good = tmp_path / "other-id.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows[2]["seq"] = "two"
    rows[3]["content"] = "a string"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows) + "[" * 50_000 + "\n")

    refused = hygieia("sessions", "import", str(bad), env=env)
    errors = [line for line in refused.stderr.splitlines() if "error:" in line]
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert (
        len(errors) == 3
        and "line 3" in errors[0]
        and "line 4" in errors[1]
        and f"line {len(rows) + 1}" in errors[2]
    )
    assert "nothing was imported" in refused.stderr

    live = hygieia("sessions", "import", str(good), env=env)
    assert live.returncode == 1 and "live session" in live.stderr and "--replace" in live.stderr
    replaced = hygieia("sessions", "import", str(good), "--replace", "--json", env=env)
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads(replaced.stdout)["session_id"] == "f" * 32
    shown = hygieia("sessions", "show", "f" * 32, env=env)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr
