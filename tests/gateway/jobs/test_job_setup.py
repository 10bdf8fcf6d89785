"""Which jobs ``hygieia run`` schedules for a configuration, and what ``hygieia doctor`` says of retention."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.jobs.setup import JobParts, build_jobs, task_book
from gateway.store.repository import Store
from tests.gateway.cli.test_cli import hygieia
from tests.gateway.conftest import gateway_rig, make_settings
from tests.process_env import clean_env


async def job_names(store: Store, **overrides: Any) -> list[str]:
    settings = make_settings(**overrides)
    async with gateway_rig(store, settings=settings, start=False) as rig:
        parts = JobParts(
            store,
            rig.gateway,
            rig.engine,
            rig.directory,
            rig.agent.tools.definitions,
            task_book(settings, store),
        )
        return [job.name for job in build_jobs(settings, parts).jobs]


async def test_by_default_the_sweep_upkeep_and_tasks_run_and_retention_does_not(store: Store) -> None:
    assert await job_names(store) == ["sweep", "upkeep", "tasks"]


async def test_a_reset_policy_and_retention_add_their_jobs(store: Store) -> None:
    names = await job_names(
        store, sessions={"idle_reset_minutes": 120}, scheduler={"retention": {"enabled": True}}
    )
    assert names == ["sweep", "resets", "upkeep", "retention", "tasks"]


async def test_the_scheduler_can_be_turned_off_entirely(store: Store) -> None:
    assert await job_names(store, scheduler={"enabled": False}) == []


def test_doctor_shows_the_retention_policy(tmp_path: Path) -> None:
    env = {**clean_env(), "HYGIEIA_DATA_DIR": str(tmp_path)}
    off = hygieia("doctor", "--offline", "--json", env=env)
    on = hygieia(
        "doctor",
        "--offline",
        "--json",
        env={
            **env,
            "HYGIEIA_SCHEDULER__RETENTION__ENABLED": "true",
            "HYGIEIA_SCHEDULER__RETENTION__ARCHIVED_DAYS": "90",
        },
    )

    def detail(result: Any) -> str:
        return next(c["detail"] for c in json.loads(result.stdout) if c["name"] == "retention")

    assert detail(off).startswith("off: every message is kept")
    assert detail(on).startswith("on: archived messages older than 90 days are deleted daily at 04:45")
