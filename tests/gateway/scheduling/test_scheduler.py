"""The scheduler wrapper: start, run a coroutine job, stop; the schedules it understands."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gateway.scheduling.scheduler import Cron, Every, Scheduler, cron_weekdays


async def test_an_interval_job_runs_while_started_and_not_after_stop() -> None:
    ran: list[int] = []

    async def job() -> None:
        ran.append(1)

    scheduler = Scheduler()
    scheduler.add_interval("tick", job, seconds=0.05)
    await scheduler.start()
    await asyncio.sleep(0.3)
    await scheduler.stop()
    await asyncio.sleep(0.05)  # a run already handed to the loop may still finish
    count = len(ran)
    await asyncio.sleep(0.2)

    assert count >= 2 and len(ran) == count
    assert not scheduler.running


def test_a_crontab_weekday_range_means_monday_to_friday_as_in_crontab() -> None:
    # APScheduler 3's own from_crontab reads "1-5" as Tuesday to Saturday.
    cron = Cron("30 8 * * 1-5", "Europe/Berlin")
    sunday_noon = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    fires = [cron.next_after(sunday_noon)]
    for _ in range(5):
        previous = fires[-1]
        assert previous is not None
        fires.append(cron.next_after(previous))

    local = [f.astimezone(ZoneInfo("Europe/Berlin")) for f in fires if f is not None]
    assert [f.strftime("%a %H:%M") for f in local] == [
        "Mon 08:30",
        "Tue 08:30",
        "Wed 08:30",
        "Thu 08:30",
        "Fri 08:30",
        "Mon 08:30",
    ]


@pytest.mark.parametrize(
    ("field", "days"),
    [("0", "sun"), ("7", "sun"), ("5-7", "sun,fri,sat"), ("*/2", "sun,tue,thu,sat"), ("mon,wed", "mon,wed")],
)
def test_crontab_weekdays_become_day_names(field: str, days: str) -> None:
    assert cron_weekdays(field) == days


@pytest.mark.parametrize(
    "expression", ["nonsense", "61 * * * *", "* * * *", "* * * * 9", "0 9 1 * 1", "* * * * 5-1", "a b c d e"]
)
def test_a_nonsense_cron_expression_is_a_value_error_saying_why(expression: str) -> None:
    with pytest.raises(ValueError, match="cron"):
        Cron(expression)


def test_a_cron_that_can_never_fire_has_no_next_time() -> None:
    assert Cron("0 0 31 2 *").next_after(datetime(2026, 1, 1, tzinfo=UTC)) is None


def test_every_steps_by_its_interval() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert Every(90).next_after(start) == start + timedelta(seconds=90)
    assert Every(90).describe() == "every 90 s" and Every(3600).describe() == "every 1 h"
