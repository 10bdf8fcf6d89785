"""Short session ids: ``sessions show``, ``export`` and ``restore`` (and ``search --session``) take
the start of an id that ``sessions search`` prints; an ambiguous start lists the candidates; a
search that shows fewer matches than it has says so. Through the real entry point."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.types import ChatMessage, CompactionPlan, Insertion
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.conftest import migrated
from tests.gateway.cli.test_cli import hygieia
from tests.process_env import clean_env

COMMANDS = {
    "show": ("sessions", "show"),
    "export": ("sessions", "export"),
    "restore": ("sessions", "restore"),
}
SESSIONS = 17  # more than 16 ids: two of them share a first hex digit
WORD = "zanzibar"


@dataclass(frozen=True)
class Seeded:
    compacted: str
    """The session with a compaction (restore has something to undo)."""
    ids: list[str]

    def ambiguous(self) -> str:
        """A start that at least two ids share."""
        firsts = [i[0] for i in self.ids]
        return next(c for c in firsts if firsts.count(c) > 1)

    def unknown(self) -> str:
        """A start of hex digits no id has."""
        taken = {i[:2] for i in self.ids}
        return next(
            f"{a}{b}" for a in "0123456789abcdef" for b in "0123456789abcdef" if f"{a}{b}" not in taken
        )


async def _seed(url: str) -> Seeded:
    db = Database(url)
    await db.connect()
    try:
        store = Store(db)
        ids: list[str] = []
        for n in range(SESSIONS):
            info = await store.get_or_create_session(
                f"telegram:dm:{n}", platform="telegram", chat_id=str(n), system_prompt="sys", model="m"
            )
            await store.append_message(info.id, ChatMessage.user(f"{WORD} number {n}"))
            ids.append(info.id)
        compacted = ids[0]
        kept = []
        for text in ("second question", "reply two", "latest"):
            stored = await store.append_message(compacted, ChatMessage.user(text))
            assert stored.id is not None
            kept.append(stored.id)
        first = (await store.messages_after(compacted, -1))[0]
        assert first.id is not None
        await store.archive_and_summarize(
            compacted,
            CompactionPlan(
                trigger="manual",
                archive_ids=(first.id,),
                insertions=(
                    Insertion(anchor_id=first.id, message=ChatMessage.user("summary", kind="summary")),
                ),
                first_kept_id=kept[0],
                tokens_before=100,
                tokens_after=40,
                model="m",
                duration_ms=3,
            ),
        )
        return Seeded(compacted, ids)
    finally:
        await db.dispose()


@pytest.fixture
async def seeded(db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    await migrated(db_url, tmp_path_factory.getbasetemp())
    return await _seed(db_url)


@pytest.fixture
def env(db_url: str, tmp_path: Path) -> dict[str, str]:
    values = clean_env()
    values["HYGIEIA_DATA_DIR"] = str(tmp_path / "data")
    values["HYGIEIA_DATABASE_URL"] = db_url
    values["COLUMNS"] = "200"
    return values


def _search_prints_the_short_id(env: dict[str, str], session_id: str) -> str:
    """The session column of ``sessions search`` for the compacted session's archived message."""
    result = hygieia("sessions", "search", f"{WORD} number 0", "--limit", "1", env=env)
    assert result.returncode == 0, result.stderr
    short = session_id[:12]
    assert short in result.stdout and session_id not in result.stdout
    return short


@pytest.mark.parametrize("command", COMMANDS)
async def test_a_command_takes_the_short_id_search_prints(
    seeded: Seeded, env: dict[str, str], command: str
) -> None:
    short = _search_prints_the_short_id(env, seeded.compacted)
    result = hygieia(*COMMANDS[command], short, env=env)
    assert result.returncode == 0, result.stderr
    if command == "show":
        assert f"session {seeded.compacted}" in result.stdout
    elif command == "export":
        first = json.loads(result.stdout.splitlines()[0])
        assert (first["type"], first["id"]) == ("session", seeded.compacted)
    else:
        assert result.stdout.startswith("restored compaction ")


@pytest.mark.parametrize("command", COMMANDS)
async def test_an_ambiguous_start_lists_the_candidates_and_exits_1(
    seeded: Seeded, env: dict[str, str], command: str
) -> None:
    start = seeded.ambiguous()
    result = hygieia(*COMMANDS[command], start, env=env)
    assert result.returncode == 1
    sharing = [i for i in seeded.ids if i.startswith(start)]
    lines = result.stderr.strip().splitlines()
    assert (
        lines[0] == f"error: {len(sharing)} sessions have ids starting with '{start}'; give more of the id:"
    )
    listed = sorted(line.split()[0] for line in lines[1:])
    assert listed == sorted(sharing)
    assert all(line.startswith("  ") and "telegram:dm:" in line for line in lines[1:])
    assert result.stdout == "" and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", COMMANDS)
async def test_an_unknown_start_is_one_line_and_exits_1(
    seeded: Seeded, env: dict[str, str], command: str
) -> None:
    start = seeded.unknown()
    result = hygieia(*COMMANDS[command], start, env=env)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: no session id starts with '{start}' (`hygieia sessions list` shows them)"
    )


async def test_restore_by_an_ambiguous_start_changes_nothing(seeded: Seeded, env: dict[str, str]) -> None:
    assert hygieia("sessions", "restore", seeded.ambiguous(), env=env).returncode == 1
    listed = json.loads(hygieia("sessions", "list", "--json", "--key", "telegram:dm:0", env=env).stdout)
    assert [(s["archived"], s["compactions"]) for s in listed if s["id"] == seeded.compacted] == [(1, 1)]


async def test_search_session_filter_takes_a_short_id(seeded: Seeded, env: dict[str, str]) -> None:
    result = hygieia("sessions", "search", WORD, "--session", seeded.ids[5][:12], "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert [h["session_id"] for h in json.loads(result.stdout)] == [seeded.ids[5]]


async def test_a_truncated_search_says_how_many_it_shows_of_how_many(
    seeded: Seeded, env: dict[str, str]
) -> None:
    result = hygieia("sessions", "search", WORD, "--limit", "5", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == (
        f"showing 5 of {SESSIONS} matches (--limit to see more)"
    )


async def test_a_search_showing_every_match_says_no_more(seeded: Seeded, env: dict[str, str]) -> None:
    result = hygieia("sessions", "search", WORD, "--limit", str(SESSIONS), env=env)
    assert result.returncode == 0, result.stderr
    assert f"{SESSIONS} match(es)" in result.stdout and "showing" not in result.stdout
