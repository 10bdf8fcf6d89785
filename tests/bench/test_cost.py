"""bench/cost.py: the month's replay is the same for the same seed, and caching pays on a busy group."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import cost

ROOT = Path(__file__).resolve().parents[2]
SLICE = 60  # events of the first day: enough for compactions to be rare and turns many


def test_the_traffic_is_reproducible_from_the_seed() -> None:
    assert cost.traffic(11, 2) == cost.traffic(11, 2)
    assert cost.traffic(11, 2) != cost.traffic(12, 2)
    kinds = {e.kind for e in cost.traffic(11, 1)}
    assert kinds == set(cost.KINDS)


async def test_the_replays_figures_are_reproducible_from_the_seed() -> None:
    events = cost.traffic(5, 1)[:SLICE]
    first = cost.figures(await cost.replay(events, "auto", 5), 1)
    again = cost.figures(await cost.replay(events, "auto", 5), 1)
    assert first == again
    assert first["all"]["turns"] > 0 and first["all"]["usd_per_day"] > 0


_IN_A_FRESH_PROCESS = """
import asyncio, json, sys
sys.path.insert(0, "bench")
import cost
events = cost.traffic(5, 1)[:30]
print(json.dumps(cost.figures(asyncio.run(cost.replay(events, "1h", 5)), 1)))
"""


async def test_the_figures_do_not_depend_on_the_process_hash_seed() -> None:
    # Equal twice in one process is not enough: an order that follows str hashes (a set of
    # names, say) would change the replay from one run of the bench to the next.
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # this process's hashes are randomized
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _IN_A_FRESH_PROCESS, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE
    )
    here = cost.figures(await cost.replay(cost.traffic(5, 1)[:30], "1h", 5), 1)
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    assert json.loads(out) == json.loads(json.dumps(here)) and here["all"]["turns"] > 0


async def test_caching_costs_the_busy_group_less_than_no_caching() -> None:
    events = [e for e in cost.traffic(5, 1) if e.kind == "busy group"][:SLICE]
    cached = cost.figures(await cost.replay(events, "auto", 5), 1)["busy group"]
    uncached = cost.figures(await cost.replay(events, "none", 5), 1)["busy group"]
    assert uncached["cache_read_share"] == 0.0 and cached["cache_read_share"] > 0.3
    assert cached["usd_per_day"] < uncached["usd_per_day"]


def test_replays_side_by_side_give_the_figures_of_one_process() -> None:
    one = cost.measure(5, 1, processes=1)
    side_by_side = cost.measure(5, 1, processes=2)
    assert json.dumps(one, sort_keys=True) == json.dumps(side_by_side, sort_keys=True)


async def test_the_replay_names_the_misses_that_remain_and_what_they_add_to_the_bill() -> None:
    events = [e for e in cost.traffic(5, 1) if e.kind == "dm"]
    short = cost.figures(await cost.replay(events, "5m", 5), 1)["dm"]["misses"]
    uncached = cost.figures(await cost.replay(events, "none", 5), 1)["dm"]["misses"]
    # A DM's turns are hours apart: under 5m each turn after the first finds its prefix lapsed.
    assert short["first_call/new_session"]["calls"] == 1
    assert short["expired/ttl"]["calls"] >= 2 and short["expired/ttl"]["added_share"] > 0
    assert all(m["added_share"] == 0 for m in uncached.values())
