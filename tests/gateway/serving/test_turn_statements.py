"""The SQL an addressed turn runs stays a handful (counted with engine events).

On main before this change a turn ran 16 statements in 9 transactions between the inbox commit
and the agent's call (SQLite; 17 in 9 on PostgreSQL), and 29 in 16 from intake to an idle
worker (31 in 16); now 5 in 1 (6 on PostgreSQL: its advisory lock), and 13 in 6 from intake to
idle (23 in 7 on PostgreSQL: each of its five transactions after the agent call first checks the
turn still holds its lease, which is how a worker that lost it stops before writing). Those 13
missed the transactions that run whole in a worker thread (the usage record's two statements):
counted on every engine, the SQLite turn is 15 in 7. The reply now carries its call's usage and
the state in its own transaction: 14 in 4 (19 in 4 on PostgreSQL), and a chat's first message
opens its session inside the claim.
"""

from __future__ import annotations

from pathlib import Path

from tests.turn_probe import KEY, QUIET_LEASES, probe

BEFORE_CALL_STATEMENTS = 6
BEFORE_CALL_TRANSACTIONS = 1
WHOLE_TURN_STATEMENTS = {"sqlite": 15, "postgresql": 21}
WHOLE_TURN_TRANSACTIONS = 5


async def test_an_addressed_turn_runs_a_handful_of_statements(db_url: str, tmp_path: Path) -> None:
    dialect = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    async with probe(db_url, tmp_path, cluster=QUIET_LEASES) as p:
        await p.fill(40)
        await p.turn()  # the process's first turn reads the view into memory
        for _ in range(3):
            turn = await p.turn()
            assert turn.before_call.statements <= BEFORE_CALL_STATEMENTS, turn
            assert turn.before_call.transactions <= BEFORE_CALL_TRANSACTIONS, turn
            assert 0 < turn.whole.statements <= WHOLE_TURN_STATEMENTS[dialect], turn
            assert turn.whole.transactions <= WHOLE_TURN_TRANSACTIONS, turn


async def test_a_chats_first_message_opens_its_session_in_the_claims_transaction(
    db_url: str, tmp_path: Path
) -> None:
    async with probe(db_url, tmp_path, cluster=QUIET_LEASES) as p:
        first = await p.turn()  # no session yet: the claim opens it and appends the message
        assert first.before_call.transactions == BEFORE_CALL_TRANSACTIONS, first
        info = await p.service.store.current_session(KEY)
        assert info is not None
        assert info.system_prompt == p.service.settings.sessions.system_prompt


def _transactions(log: list[str]) -> list[list[str]]:
    """The probed turn's statements, one list per transaction."""
    groups: list[list[str]] = []
    for line in log:
        if line == "-- transaction":
            groups.append([])
        elif groups:
            groups[-1].append(line)
    return groups


async def test_a_reply_its_calls_usage_and_the_state_are_stored_in_one_transaction(
    db_url: str, tmp_path: Path
) -> None:
    async with probe(db_url, tmp_path, cluster=QUIET_LEASES) as p:
        await p.fill(4)
        await p.turn()
        p.counter.keep_log = True
        await p.turn()
        (reply,) = [t for t in _transactions(p.counter.log) if any("INSERT INTO usage " in s for s in t)]
        assert any(s.startswith("INSERT INTO messages") for s in reply), reply
        assert any("context_state" in s for s in reply), reply
