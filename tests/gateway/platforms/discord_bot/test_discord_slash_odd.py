"""Slash interactions with odd options — what a client with a stale command list, or a
hostile one, can send: options missing, extra, of the wrong type or shape, huge, in odd
Unicode; a command no longer registered. Each gets a clear answer through its interaction,
within Discord's limits, and nothing is logged as an error."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gateway.store.repository import Store
from tests.fakes.discord_interactions import RESPONSE_DEADLINE
from tests.gateway.discord_support import USER, USER_NAME
from tests.gateway.platforms.discord_bot.test_discord_slash import stack

HUGE = "x" * 6000  # Discord's own limit for a string option's value
ODD_UNICODE = "\u202eevil\u200d\U0001f469\u200d\U0001f4bb\u0301\ufeff\x00\x1b[31m\U000e0001"

CASES: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "required option missing": ("cancel", []),
    "option without a value": ("cancel", [{"name": "id", "type": 3}]),
    "value null": ("cancel", [{"name": "id", "type": 3, "value": None}]),
    "integer instead of string": ("cancel", [{"name": "id", "type": 4, "value": 12345}]),
    "boolean instead of string": ("cancel", [{"name": "id", "type": 5, "value": True}]),
    "list value": ("cancel", [{"name": "id", "type": 3, "value": ["a", "b"]}]),
    "object value": ("cancel", [{"name": "id", "type": 3, "value": {"id": "a"}}]),
    "subcommand shape": ("cancel", [{"name": "id", "type": 1, "options": [{"name": "x", "value": "y"}]}]),
    "unknown extra option": ("status", [{"name": "bogus", "type": 3, "value": "surprise"}]),
    "two values for one option": (
        "compact",
        [{"name": "focus", "type": 3, "value": "one"}, {"name": "focus", "type": 3, "value": "two"}],
    ),
    "huge string": ("cancel", [{"name": "id", "type": 3, "value": HUGE}]),
    "huge focus": ("compact", [{"name": "focus", "type": 3, "value": HUGE}]),
    "odd unicode": ("cancel", [{"name": "id", "type": 3, "value": ODD_UNICODE}]),
    "only whitespace": ("cancel", [{"name": "id", "type": 3, "value": " \n\t "}]),
    "a command line inside": ("cancel", [{"name": "id", "type": 3, "value": "x\n/new"}]),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_odd_options_get_a_clear_answer_never_a_traceback(
    case: str, db_url: str, tmp_path: Path, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    name, options = CASES[case]
    caplog.set_level(logging.WARNING)
    async with stack(db_url, tmp_path) as s:
        interaction = s.discord.slash.invoke(
            name,
            user_id=USER,
            user_name=USER_NAME,
            channel_id=s.discord.channel_id,
            guild_id=s.discord.guild_id,
            raw_options=options,
        )
        await s.discord.slash.wait_until(interaction, timeout=20)
        await s.settle()
    status, after, _ = interaction.callbacks[0]
    assert status == 200 and after < RESPONSE_DEADLINE
    assert interaction.texts[0].strip() and all(len(t) <= 2000 for t in interaction.texts)
    assert "Traceback" not in interaction.texts[0]
    assert not any(repr_ in interaction.texts[0] for repr_ in ("['", "{'", "None"))  # no Python reprs
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]
    assert s.discord.sent == []  # answered through the interaction, nothing posted to the channel


@pytest.mark.parametrize("value", [["a", "b"], {"id": "a"}])
async def test_a_value_that_is_no_scalar_is_ignored_as_if_missing(
    value: Any, db_url: str, tmp_path: Path, store: Store
) -> None:
    async with stack(db_url, tmp_path) as s:
        interaction = s.discord.slash.invoke(
            "cancel",
            user_id=USER,
            user_name=USER_NAME,
            channel_id=s.discord.channel_id,
            guild_id=s.discord.guild_id,
            raw_options=[{"name": "id", "type": 3, "value": value}],
        )
        await s.discord.slash.wait_until(interaction, timeout=20)
    assert interaction.texts == ["Which task? Send /cancel ID (/tasks lists them)."]


async def test_a_command_no_longer_registered_is_answered_that_it_is_unknown(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    async with stack(db_url, tmp_path) as s:
        interaction = s.discord.slash.invoke(
            "selfdestruct",
            user_id=USER,
            user_name=USER_NAME,
            channel_id=s.discord.channel_id,
            guild_id=s.discord.guild_id,
            stale=True,
        )
        await s.discord.slash.wait_until(interaction, timeout=20)
    assert interaction.texts == ["I don't know that command."] and interaction.ephemeral
