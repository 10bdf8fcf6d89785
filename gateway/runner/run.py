"""``hygieia run``: the service until a signal (or the end of piped input), then a clean stop.

On SIGINT/SIGTERM it stops serving new turns, lets the running ones finish for
``sessions.turn_grace_seconds``, sends what is ready, and returns 0; anything unfinished stays in
the inbox and is served on the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal

from gateway.cluster.roles import check_role
from gateway.config import Settings
from gateway.platforms.console.adapter import ConsoleAdapter
from gateway.runner.adapters import build_adapters
from gateway.runner.gateway_parts import dialect_of
from gateway.runner.service import Service

_log = logging.getLogger(__name__)

OFFLINE_BANNER = (
    "OFFLINE MODE: no ANTHROPIC_API_KEY is set, so answers come from the local offline provider, "
    "not a model. Set ANTHROPIC_API_KEY to talk to Claude."
)


async def run_service(
    settings: Settings,
    platforms: list[str] | None,
    *,
    lease_seconds: float | None = None,
    role: str = "all",
) -> int:
    """``hygieia run``: serve until SIGINT/SIGTERM, or until piped console input is used up; exit code."""
    check_role(role, dialect_of(settings))  # before anything connects: one clear line
    adapters = build_adapters(settings, platforms, role)
    service = await Service.build(settings, adapters, lease_seconds=lease_seconds, role=role)
    console = next((a for a in adapters if isinstance(a, ConsoleAdapter)), None)
    if service.provider.name == "offline":
        # Once: where a person reads the console, the console shows it and the log line goes to the
        # file; elsewhere (stderr piped to a collector) the warning in the log is the notice.
        watched = console is not None and console.watched
        _log.log(logging.INFO if watched else logging.WARNING, OFFLINE_BANNER)
        if console is not None and watched:
            console.announce(OFFLINE_BANNER)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, _on_signal, stop, sig)
            installed.append(sig)
    try:
        async with service:
            tune_gc()
            waiters = [asyncio.create_task(stop.wait())]
            if console is not None:
                waiters.append(asyncio.create_task(console.finished.wait()))
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()
            if not stop.is_set():
                # Input ended: finish what a previous run left (recovered messages) before leaving.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(service.gateway.wait_idle(), settings.sessions.turn_grace_seconds)
                await service.delivery.flush()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
    return 0


GC_THRESHOLDS = (50_000, 20, 100)
"""Young collections every 50,000 allocations instead of 700, and full ones a tenth as often:
a turn allocates thousands of short-lived objects, and with the defaults the collector walked
every live object (the cached active views included) often enough to set the p99 of a turn
(``bench/gateway_overhead.py --gc`` measures both)."""


def tune_gc() -> None:
    """After start-up: move everything allocated so far (modules, the service's objects) out of
    the collector's sight (``gc.freeze()``: they live as long as the process), and collect less
    often. Reference cycles are still collected, only in bigger batches."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    _log.info("%s received: finishing running turns, then stopping", sig.name)
    stop.set()
