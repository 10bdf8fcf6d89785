"""The environment for a child `hygieia` process in tests: the machine's, without our own settings."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

OUR_PREFIXES = ("HYGIEIA_", "ANTHROPIC_", "TELEGRAM_", "DISCORD_")


def clean_env() -> dict[str, str]:
    """``os.environ`` less every variable Hygieia reads, so a developer's own setup cannot leak in."""
    return {k: v for k, v in os.environ.items() if not k.startswith(OUR_PREFIXES)}


@asynccontextmanager
async def hygieia_run(env: dict[str, str], cwd: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python -m gateway.cli run`` as a child process; killed on the way out if still running."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli",
        "run",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def sigterm_and_wait(proc: asyncio.subprocess.Process, timeout: float = 30) -> str:  # noqa: ASYNC109
    """Stop the child as an operator would; returns its stderr. A child that already died fails the
    test with the end of what it printed, not with a bare ProcessLookupError."""
    if proc.returncode is not None:
        _, early = await asyncio.wait_for(proc.communicate(), timeout)
        raise AssertionError(f"hygieia run exited early ({proc.returncode}):\n{early.decode()[-4000:]}")
    proc.send_signal(signal.SIGTERM)
    _, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    return stderr.decode()
