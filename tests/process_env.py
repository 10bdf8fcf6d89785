"""The environment for a child `hygieia` process in tests: the machine's, without our own settings."""

from __future__ import annotations

import os

OUR_PREFIXES = ("HYGIEIA_", "ANTHROPIC_", "TELEGRAM_", "DISCORD_")


def clean_env() -> dict[str, str]:
    """``os.environ`` less every variable Hygieia reads, so a developer's own setup cannot leak in."""
    return {k: v for k, v in os.environ.items() if not k.startswith(OUR_PREFIXES)}
