"""``hygieia doctor`` reports this node's clock offset against the database and warns above 2 s."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.clock import Clock, utcnow
from gateway.cli.doctor import check_clock
from gateway.store.db import Database
from tests.store.engines import only


def skewed(seconds: float) -> Clock:
    return lambda: utcnow() + timedelta(seconds=seconds)


@only("postgresql")
@pytest.mark.parametrize(("skew", "word"), [(10, "ahead of"), (-60, "behind")])
async def test_doctor_warns_when_the_node_clock_is_off_the_databases_by_more_than_2_s(
    db_url: str, database: Database, skew: float, word: str
) -> None:
    check = await check_clock(db_url, clock=skewed(skew))
    assert check is not None and check.status == "warn"
    assert f"{abs(skew):.0f}." in check.detail and word in check.detail


@only("postgresql")
async def test_doctor_reports_a_clock_in_step_with_the_database_as_ok(
    db_url: str, database: Database
) -> None:
    check = await check_clock(db_url)
    assert check is not None and check.status == "ok" and "the database's" in check.detail


@only("sqlite")
async def test_doctor_on_sqlite_says_the_process_clock_is_the_databases(
    db_url: str, database: Database
) -> None:
    check = await check_clock(db_url, clock=skewed(600))
    assert check is not None and check.status == "ok" and "SQLite" in check.detail
