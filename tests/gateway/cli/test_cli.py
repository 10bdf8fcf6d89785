"""The ``hygieia`` command as an operator runs it: a subprocess with env vars, exit codes, output."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.types import ChatMessage, CompactionPlan, Insertion
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.process_env import clean_env
from tests.store.engines import POSTGRES_URL


def hygieia(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = clean_env()
    clean["HYGIEIA_DATA_DIR"] = str(tmp_path / "data")
    clean["COLUMNS"] = "200"
    return clean


def test_help_lists_every_command(env: dict[str, str]) -> None:
    result = hygieia("--help", env=env)
    assert result.returncode == 0
    for command in ("run", "migrate", "doctor", "sessions", "admin", "bench"):
        assert command in result.stdout


def test_a_bad_setting_is_one_line_and_exit_2(env: dict[str, str]) -> None:
    result = hygieia("migrate", env={**env, "HYGIEIA_COMPRESSION__THRESHOLD": "7"})
    assert result.returncode == 2
    assert "HYGIEIA_COMPRESSION__THRESHOLD" in result.stderr
    assert "Traceback" not in result.stderr


def test_migrate_builds_an_empty_sqlite_database_and_is_idempotent(
    env: dict[str, str], tmp_path: Path
) -> None:
    first = hygieia("migrate", "--json", env=env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["from"] is None and report["to"]
    assert (tmp_path / "data" / "hygieia.db").is_file()
    again = json.loads(hygieia("migrate", "--json", env=env).stdout)
    assert again["from"] == again["to"] == report["to"]


@pytest.mark.skipif(POSTGRES_URL is None, reason="HYGIEIA_TEST_POSTGRES_URL not set")
def test_migrate_builds_the_schema_on_postgresql(env: dict[str, str]) -> None:
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    assert POSTGRES_URL is not None
    schema = f"cli_{uuid.uuid4().hex[:12]}"
    sync_url = make_url(POSTGRES_URL)
    engine = create_engine(sync_url)
    with engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = sync_url.update_query_dict({"options": f"-csearch_path={schema}"})
        result = hygieia(
            "migrate", "--json", env={**env, "HYGIEIA_DATABASE_URL": url.render_as_string(False)}
        )
        assert result.returncode == 0, result.stderr
        with engine.begin() as conn:
            tables = set(
                conn.execute(
                    text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                    {"s": schema},
                ).scalars()
            )
        assert {"sessions", "messages", "compactions", "usage", "inbox", "outbox", "memories"} <= tables
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


async def _seed(url: str) -> tuple[str, int]:
    db = Database(url)
    await db.connect()
    try:
        store = Store(db)
        info = await store.get_or_create_session(
            "console:alice", platform="console", chat_id="alice", system_prompt="sys", model="m"
        )
        ids = []
        for i, word in enumerate(["zanzibar", "reply one", "second question", "reply two", "latest"]):
            role = "user" if i % 2 == 0 else "assistant"
            stored = await store.append_message(
                info.id, ChatMessage(role=role, content=[{"type": "text", "text": word}])
            )
            assert stored.id is not None
            ids.append(stored.id)
        summary = ChatMessage.user("summary of the start", kind="summary")
        await store.archive_and_summarize(
            info.id,
            CompactionPlan(
                trigger="manual",
                archive_ids=tuple(ids[:2]),
                insertions=(Insertion(anchor_id=ids[0], message=summary),),
                first_kept_id=ids[2],
                tokens_before=100,
                tokens_after=40,
                model="m",
                duration_ms=3,
            ),
        )
        return info.id, ids[0]
    finally:
        await db.dispose()


def test_sessions_list_show_search_and_restore(env: dict[str, str], tmp_path: Path) -> None:
    assert hygieia("migrate", env=env).returncode == 0
    url = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'hygieia.db'}"
    session_id, archived_id = asyncio.run(_seed(url))

    listed = json.loads(hygieia("sessions", "list", "--json", env=env).stdout)
    assert [(s["id"], s["active"], s["archived"], s["compactions"]) for s in listed] == [
        (session_id, 4, 2, 1)
    ]

    shown = hygieia("sessions", "show", session_id, env=env)
    assert shown.returncode == 0 and "archived" in shown.stdout and "zanzibar" in shown.stdout

    hits = json.loads(
        hygieia("sessions", "search", "zanzibar", "--state", "archived", "--json", env=env).stdout
    )
    assert [h["message_id"] for h in hits] == [archived_id]
    weird = hygieia("sessions", "search", '"; DROP TABLE messages; NEAR(', env=env)
    assert weird.returncode == 0 and "no matches" in weird.stdout

    restored = hygieia("sessions", "restore", session_id, env=env)
    assert restored.returncode == 0, restored.stderr
    after = json.loads(hygieia("sessions", "list", "--json", env=env).stdout)
    assert (after[0]["active"], after[0]["archived"]) == (5, 0)


def test_showing_an_unknown_session_is_a_clear_error(env: dict[str, str]) -> None:
    assert hygieia("migrate", env=env).returncode == 0
    result = hygieia("sessions", "show", "nope", env=env)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and result.stderr.strip()


def test_doctor_offline_reports_a_fresh_setup(env: dict[str, str]) -> None:
    result = hygieia("doctor", "--offline", "--json", env=env)
    checks = {c["name"]: c["status"] for c in json.loads(result.stdout)}
    assert result.returncode == 0
    assert checks["database"] == "warn"  # empty until migrated
    assert checks["anthropic"] == "warn"  # offline provider


def test_doctor_fails_on_a_malformed_telegram_token(env: dict[str, str]) -> None:
    result = hygieia("doctor", "--offline", "--json", env={**env, "TELEGRAM_BOT_TOKEN": "not-a-token"})
    assert result.returncode == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["telegram"]["status"] == "fail"
    assert "not-a-token" not in result.stdout


async def _seed_dead_letter(url: str) -> str:
    db = Database(url)
    await db.connect()
    try:
        store = Store(db)
        info = await store.get_or_create_session(
            "console:bob", platform="console", chat_id="bob", system_prompt="sys", model="m"
        )
        target = {"platform": "console", "chat_id": "bob", "thread_id": None, "reply_to_message_id": None}
        outbox_id = await store.outbox_put(
            session_id=info.id, target=target, text="undeliverable words", inbox_ids=[], message_id=None
        )
        await store.outbox_mark_failed(outbox_id, "AdapterError: the terminal went away")
        return info.id
    finally:
        await db.dispose()


def test_sessions_show_lists_dead_letters_with_their_errors(env: dict[str, str], tmp_path: Path) -> None:
    assert hygieia("migrate", env=env).returncode == 0
    session_id = asyncio.run(_seed_dead_letter(f"sqlite+aiosqlite:///{tmp_path / 'data' / 'hygieia.db'}"))

    shown = hygieia("sessions", "show", session_id, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "dead letter" in shown.stdout and "the terminal went away" in shown.stdout
    as_json = json.loads(hygieia("sessions", "show", session_id, "--json", env=env).stdout)
    [dead] = as_json["dead_letters"]
    assert (dead["source"], dead["text"]) == ("outbox", "undeliverable words")


def _one_clean_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "command", [["sessions", "list"], ["sessions", "show", "abc"], ["sessions", "search", "x"]]
)
def test_sessions_on_a_database_never_migrated_says_to_run_migrate(
    env: dict[str, str], command: list[str]
) -> None:
    result = hygieia(*command, env=env)
    assert result.returncode == 1
    assert "hygieia migrate" in _one_clean_line(result)


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--since", "0001-01-01T00:00:00+05:00"), ("--until", "9999-12-31T23:00:00-05:00")],
)
def test_a_search_time_out_of_range_in_utc_is_one_line(env: dict[str, str], flag: str, value: str) -> None:
    assert hygieia("migrate", env=env).returncode == 0
    result = hygieia("sessions", "search", "x", flag, value, env=env)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and flag in result.stderr and "range" in result.stderr


def test_a_yaml_syntax_error_is_one_line(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("compression:\n  threshold: [0.5\n")
    result = hygieia("sessions", "list", env={**env, "HYGIEIA_CONFIG": str(config)})
    assert result.returncode == 2
    assert "not valid YAML" in _one_clean_line(result)


@pytest.mark.parametrize("command", [["doctor", "--offline"], ["run"]])
def test_an_unknown_timezone_stops_doctor_and_run_with_one_line(
    env: dict[str, str], command: list[str]
) -> None:
    result = hygieia(*command, env={**env, "HYGIEIA_TIMEZONE": "Mars/Olympus_Mons"}, stdin="")
    assert result.returncode != 0
    assert "HYGIEIA_TIMEZONE" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_doctor_fails_on_an_unknown_context_engine_with_the_installed_ones(env: dict[str, str]) -> None:
    result = hygieia("doctor", "--offline", "--json", env={**env, "HYGIEIA_CONTEXT__ENGINE": "lossless"})
    assert result.returncode == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["context engine"]["status"] == "fail"
    assert checks["context engine"]["detail"].startswith(
        "unknown context engine 'lossless' (context.engine); installed engines: compressor, sliding"
    )


def test_run_stops_on_an_unknown_context_engine_with_one_line(env: dict[str, str]) -> None:
    result = hygieia("run", env={**env, "HYGIEIA_CONTEXT__ENGINE": "lossless"}, stdin="")
    assert result.returncode != 0
    line = _one_clean_line(result)
    assert "unknown context engine 'lossless'" in line and "installed engines: compressor, sliding" in line


def test_the_command_line_loads_no_platform_model_or_media_library_until_a_command_needs_it(
    env: dict[str, str],
) -> None:
    # Every `hygieia` command pays for what the CLI imports; `run` and `doctor` load the rest.
    heavy = ("anthropic", "telegram", "discord", "aiohttp", "PIL", "pypdf", "gateway.runner.service")
    probe = "import sys, gateway.cli.app; print(' '.join(m for m in sys.argv[1:] if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", probe, *heavy], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []
