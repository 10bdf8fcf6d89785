"""Calling code we do not own (a deployer's hook, a plugin engine's step) so that it cannot wedge
or end the service.

:func:`bounded_call` runs a call under a time limit and answers :class:`Done` or :class:`Failed`,
never raising what the call raised: an exception, ``CancelledError`` raised by the call itself,
``SystemExit`` or ``KeyboardInterrupt`` (argparse, click and ``sys.exit`` raise those) all become
a :class:`Failed`. An async call runs in a task of its own; a plain one in a daemon thread of its
own, so that one still running at its limit is abandoned without blocking the event loop or the
process's exit (a thread pool's workers are joined at exit). Only the caller's own cancellation
propagates: a ``CancelledError`` is the call's own when the task awaiting it is not being
cancelled (``Task.cancelling()``). :func:`guarded` does the same for a synchronous call made on
the event loop, with no time limit (nothing can bound a plain call without a thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")

FailureKind = Literal["timeout", "raised", "cancelled", "exited"]


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """The call returned ``value``."""

    value: T


@dataclass(frozen=True, slots=True)
class Failed:
    """The call did not return: ``reason`` says why in one line; ``error`` is what it raised."""

    kind: FailureKind
    reason: str
    error: BaseException | None = None


Outcome = Done[T] | Failed

CANCEL_GRACE_SECONDS = 1.0

# Abandoned tasks, kept referenced until they end (the loop holds tasks only weakly).
_abandoned: set[asyncio.Future[Any]] = set()


def failure_of(exc: BaseException) -> Failed:
    """What ``exc``, raised by the call itself, makes of it."""
    if isinstance(exc, asyncio.CancelledError):
        return Failed("cancelled", "raised CancelledError", exc)
    if isinstance(exc, SystemExit | KeyboardInterrupt):
        detail = f"({exc.args[0]!r})" if exc.args else ""
        return Failed("exited", f"raised {type(exc).__name__}{detail}", exc)
    text = str(exc).strip().splitlines()
    return Failed("raised", f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__, exc)


def guarded(call: Callable[..., T], *args: Any) -> Outcome[T]:
    """``call(*args)`` on this thread; whatever it raises becomes a :class:`Failed`."""
    try:
        return Done(call(*args))
    except BaseException as exc:  # code we do not own may raise anything
        return failure_of(exc)


def is_async(call: Callable[..., Any]) -> bool:
    """An ``async def`` function, a partial of one, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(
        inspect.getattr_static(type(call), "__call__", None)
    )


async def _captured(awaitable: Awaitable[T]) -> Outcome[T]:
    try:
        return Done(await awaitable)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # we cancelled it: at its limit, or because our caller was cancelled
        return failure_of(exc)
    except BaseException as exc:  # in a task, SystemExit would stop the event loop
        return failure_of(exc)


def _abandon(future: asyncio.Future[Any]) -> None:
    future.cancel()
    if not future.done():
        _abandoned.add(future)
        future.add_done_callback(_abandoned.discard)


async def _waited(future: asyncio.Future[Outcome[T]], limit: float) -> Outcome[T]:
    try:
        done, _ = await asyncio.wait({future}, timeout=limit)
    except asyncio.CancelledError:
        _abandon(future)
        raise  # the service's own cancellation
    if not done:
        future.cancel()
        # A call that honours its cancellation is given a moment to unwind (an async generator
        # must not be running still when its owner closes it); one that does not is left behind.
        await asyncio.wait({future}, timeout=CANCEL_GRACE_SECONDS)
        _abandon(future)
        return Failed("timeout", f"still running after {limit:g} s: abandoned")
    if future.cancelled():  # cancelled by someone else than us: the call's own doing
        return Failed("cancelled", "was cancelled")
    return future.result()


async def bounded_await(awaitable: Awaitable[T], limit: float) -> Outcome[T]:
    """``awaitable`` in a task of its own, given ``limit`` seconds."""
    return await _waited(asyncio.ensure_future(_captured(awaitable)), limit)


def _in_thread(call: Callable[..., Any], args: tuple[Any, ...]) -> asyncio.Future[Outcome[Any]]:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Outcome[Any]] = loop.create_future()
    context = contextvars.copy_context()

    def deliver(outcome: Outcome[Any]) -> None:
        if not future.done():
            future.set_result(outcome)

    def work() -> None:
        outcome = guarded(context.run, call, *args)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for it any more
            loop.call_soon_threadsafe(deliver, outcome)

    name = getattr(call, "__qualname__", type(call).__qualname__)
    threading.Thread(target=work, name=f"bounded {name}", daemon=True).start()
    return future


async def bounded_call(call: Callable[..., Any], *args: Any, limit: float) -> Outcome[Any]:
    """``call(*args)`` under ``limit`` seconds: awaited in a task when it is async, else run in a
    thread (and, should a plain call return an awaitable, that awaited in the time left)."""
    if is_async(call):
        return await bounded_await(_started(call, args), limit)
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcome = await _waited(_in_thread(call, args), limit)
    if isinstance(outcome, Done) and inspect.isawaitable(outcome.value):
        left = max(0.0, limit - (loop.time() - started))
        return await bounded_await(outcome.value, left)
    return outcome


async def _started(call: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    # Called inside the task, so that even what the call raises before its first await is caught.
    return await call(*args)
