"""Two real `hygieia run` processes with HYGIEIA_DISCORD__SHARD_IDS=auto on one database split the shards
and answer every message once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.clock import utcnow
from gateway.cluster.shard_claims import held_by
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from tests.fakes.discord import FakeDiscord
from tests.gateway.discord_support import USER, dm, in_guild
from tests.gateway.platforms.discord_bot.test_discord_shards import channel_of, guilds_on
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait
from tests.store.engines import engine_params

REPO = Path(__file__).resolve().parents[3]


async def until(condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:  # noqa: ASYNC109
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# One engine (PostgreSQL when configured): two processes take ~30 s on a loaded machine, and the
# leases under it are tested on both engines in test_shard_claims.py.
@pytest.mark.parametrize("db_url", engine_params()[-1:], indirect=True)
async def test_two_intake_processes_split_the_shards_and_answer_each_message_once(
    db_url: str, tmp_path: Path
) -> None:
    await upgrade_to_head(db_url)
    shard_of = guilds_on(2, per_shard=1)
    async with FakeDiscord(guilds={g: [channel_of(g)] for g in shard_of}, rate_limit=(100, 5.0)) as fake:

        def env(node: str) -> dict[str, str]:
            data_dir = tmp_path / node
            data_dir.mkdir()
            values = clean_env()
            values.update(
                {
                    "DISCORD_BOT_TOKEN": fake.token,
                    "HYGIEIA_DISCORD_API_BASE": fake.api_base,
                    "HYGIEIA_DISCORD_GATEWAY_URL": fake.gateway_url,
                    "HYGIEIA_DISCORD__SHARD_IDS": "auto",
                    "HYGIEIA_DISCORD__SHARD_COUNT": "2",
                    "HYGIEIA_DISCORD__SHARD_LEASE_SECONDS": "3",
                    "HYGIEIA_DISCORD__IDENTIFY_INTERVAL_SECONDS": "0",  # the fake has no identify limit
                    "HYGIEIA_DISCORD__SLASH_COMMANDS": "false",
                    "HYGIEIA_ALLOWED_USERS": f"discord:{USER}",
                    "HYGIEIA_DATABASE_URL": db_url,
                    "HYGIEIA_DATA_DIR": str(data_dir),
                    "PYTHONPATH": str(REPO),
                }
            )
            return values

        async with hygieia_run(env("a"), tmp_path) as first:
            await until(lambda: fake.connected_shards() == [(0, 2), (1, 2)], "the first node on both shards")
            async with hygieia_run(env("b"), tmp_path) as second:
                # The first node gives one shard up (two nodes now) and the second claims it.
                await until(lambda: fake.identify_count == 3, "one shard moving to the second node")
                await until(lambda: fake.connected_shards() == [(0, 2), (1, 2)], "both shards up again")
                async with Database(db_url) as db:
                    owners = held_by(await Store(db).lease_list("discord-shard:"), utcnow())
                for guild in shard_of:
                    in_guild(
                        fake,
                        f"hello {guild}",
                        guild_id=guild,
                        channel_id=channel_of(guild),
                        mentions_bot=True,
                    )
                dm(fake, "a DM")
                await fake.wait_for_sent(3, timeout=60)
                await asyncio.sleep(1.0)  # a second answer would have come by now
                stderr_b = await sigterm_and_wait(second)
            stderr_a = await sigterm_and_wait(first)

    assert (first.returncode, second.returncode) == (0, 0), stderr_a + stderr_b
    assert sorted(len(shards) for shards in owners.values()) == [1, 1], owners
    answered = sorted(s.channel_id for s in fake.sent)
    assert len(answered) == 3 and len(set(answered)) == 3, [s.content for s in fake.sent]
