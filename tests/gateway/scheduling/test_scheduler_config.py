"""The scheduler's configuration keys (contract names) and the wall-clock helpers they use."""

from __future__ import annotations

import os
from datetime import UTC, datetime, time
from pathlib import Path

import pytest

from agent.errors import ConfigError
from gateway.config import load_settings
from gateway.local_time import in_quiet_hours, parse_quiet_hours


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("HYGIEIA_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_sweep_defaults_are_the_documented_ones() -> None:
    sweep = load_settings().scheduler.sweep
    assert (sweep.enabled, sweep.quiet_hours, sweep.idle_minutes, sweep.min_fill, sweep.interval_seconds) == (
        True,
        "02:00-06:00",
        30,
        0.6,
        600,
    )
    assert load_settings().scheduler.retention.enabled is False


def test_sweep_keys_come_from_their_env_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "HYGIEIA_SCHEDULER__SWEEP__ENABLED": "false",
        "HYGIEIA_SCHEDULER__SWEEP__QUIET_HOURS": "23:00-05:30",
        "HYGIEIA_SCHEDULER__SWEEP__IDLE_MINUTES": "0",
        "HYGIEIA_SCHEDULER__SWEEP__MIN_FILL": "0.7",
        "HYGIEIA_SCHEDULER__SWEEP__INTERVAL_SECONDS": "60",
        "HYGIEIA_SCHEDULER__SWEEP__MAX_SESSIONS": "3",
    }.items():
        monkeypatch.setenv(key, value)
    sweep = load_settings().scheduler.sweep
    assert (sweep.enabled, sweep.quiet_hours, sweep.idle_minutes, sweep.min_fill) == (
        False,
        "23:00-05:30",
        0,
        0.7,
    )
    assert (sweep.interval_seconds, sweep.max_sessions) == (60, 3)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HYGIEIA_SCHEDULER__SWEEP__QUIET_HOURS", "2am-6am"),
        ("HYGIEIA_SCHEDULER__SWEEP__QUIET_HOURS", "02:00-02:00"),
        ("HYGIEIA_SCHEDULER__SWEEP__QUIET_HOURS", "25:00-06:00"),
        ("HYGIEIA_SCHEDULER__SWEEP__IDLE_MINUTES", "-1"),
        ("HYGIEIA_SCHEDULER__SWEEP__INTERVAL_SECONDS", "0"),
        ("HYGIEIA_SCHEDULER__UPKEEP__AT", "4.30"),
        ("HYGIEIA_SCHEDULER__UPKEEP__PRUNE_AFTER_DAYS", "1"),
        ("HYGIEIA_TIMEZONE", "Mars/Olympus_Mons"),
    ],
)
def test_a_bad_scheduler_value_fails_with_one_line_naming_the_key(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).startswith(name) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("window", "inside", "outside"),
    [
        ("02:00-06:00", [time(2, 0), time(3, 0), time(5, 59)], [time(6, 0), time(1, 59), time(12, 0)]),
        ("22:30-05:00", [time(22, 30), time(0, 0), time(4, 59)], [time(5, 0), time(22, 29), time(12, 0)]),
        ("00:00-24:00", [time(0, 0), time(12, 0), time(23, 59)], []),
        ("18:00-24:00", [time(18, 0), time(23, 59)], [time(0, 0), time(17, 59)]),
    ],
)
def test_quiet_hours_windows_may_wrap_midnight_or_cover_the_whole_day(
    window: str, inside: list[time], outside: list[time]
) -> None:
    parsed = parse_quiet_hours(window)
    assert all(parsed.contains(t) for t in inside)
    assert not any(parsed.contains(t) for t in outside)


def test_quiet_hours_are_read_in_the_configured_time_zone() -> None:
    window = parse_quiet_hours("02:00-06:00")
    three_am_in_berlin = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)  # 03:00 CET
    assert in_quiet_hours(three_am_in_berlin, window, "Europe/Berlin")
    assert not in_quiet_hours(three_am_in_berlin, window, "America/New_York")  # 21:00 there
