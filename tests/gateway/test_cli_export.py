"""``hygieia sessions export`` and ``import``, as an operator runs them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from gateway.store.db import Database
from gateway.store.repository import Store
from tests.gateway.test_cli import _seed, env, hygieia

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
