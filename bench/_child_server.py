"""A fake server in a child process (so its CPU is not the measured process's): the child prints
its base URL on its first line of stdout; the context yields it and stops the child on exit."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.asynccontextmanager
async def child_server(script: str, *args: str) -> AsyncIterator[str]:
    """Run ``python -c script args...`` from the checkout's root; yield the URL it prints."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, *args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line:
            raise RuntimeError("the fake server did not start")
        yield line.decode().strip()
    finally:
        proc.terminate()
        await proc.wait()
