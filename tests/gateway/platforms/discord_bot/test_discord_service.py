"""`hygieia run` with DISCORD_BOT_TOKEN: the real command serves a Discord DM end to end."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.discord import FakeDiscord
from tests.gateway.conftest import MODEL
from tests.gateway.discord_support import DM_CHANNEL, USER, dm
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

REPO = Path(__file__).resolve().parents[4]


async def test_hygieia_run_answers_a_discord_dm_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    async with FakeDiscord() as discord, FakeAnthropic() as anthropic:
        env = clean_env()
        env.update(
            {
                "DISCORD_BOT_TOKEN": discord.token,
                "HYGIEIA_DISCORD_API_BASE": discord.api_base,
                "HYGIEIA_DISCORD_GATEWAY_URL": discord.gateway_url,
                "HYGIEIA_DISCORD__GUILD_READY_TIMEOUT": "0.05",  # the fake sends its guilds at once
                "ANTHROPIC_API_KEY": "test",
                "ANTHROPIC_BASE_URL": anthropic.base_url,
                "HYGIEIA_ALLOWED_USERS": f"discord:{USER}",
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "PYTHONPATH": str(REPO),
            }
        )
        async with hygieia_run(env, tmp_path) as proc:
            for _ in range(300):  # until the bot has identified on the gateway
                if discord.identify_count:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)
            dm(discord, "are you there?")
            [sent] = await discord.wait_for_sent(1, timeout=30)
            stderr = await sigterm_and_wait(proc)

    assert proc.returncode == 0, stderr
    assert sent.channel_id == DM_CHANNEL
    assert sent.content.startswith("ack: ") and sent.content.endswith("are you there?")
