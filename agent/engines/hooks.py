"""Compaction hooks a deployer adds without touching our code.

``pre_compact`` sees the trigger and the range about to be archived; it may return text the
summary must keep, or veto (a veto is refused when the window would otherwise overflow).
``post_compact`` sees the stored compaction record. Hooks are found under the entry-point group
``hygieia.hooks`` (entry point named ``pre_compact`` or ``post_compact``) and in config
(``hooks.pre_compact: "package.module:function"``); they may be plain or async functions.

Each call goes through :func:`agent.bounded.bounded_call` under ``hooks.timeout_seconds`` (a
:class:`Hook` may carry its own limit: the notes flush keeps ``compression.memory_flush_timeout_seconds``).
A hook that raises (``CancelledError``, ``SystemExit`` and ``KeyboardInterrupt`` included) or is
still running at its limit is a failed hook: logged once with its name and skipped; the compaction
goes on.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import entry_points
from typing import Any

from agent.bounded import Done, Failed, bounded_call, guarded
from agent.types import AgentSession, ChatMessage, CompactionRecord, Trigger

_log = logging.getLogger(__name__)

HOOKS_GROUP = "hygieia.hooks"
HOOK_KINDS = ("pre_compact", "post_compact")
DEFAULT_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class PreCompact:
    """What is about to be archived: the trigger, the strategy, the message range."""

    session: AgentSession
    trigger: Trigger
    strategy: str
    messages: Sequence[ChatMessage]
    overflow_imminent: bool

    @property
    def first_id(self) -> int | None:
        return next((m.id for m in self.messages if m.id is not None), None)

    @property
    def last_id(self) -> int | None:
        return next((m.id for m in reversed(self.messages) if m.id is not None), None)


@dataclass(frozen=True, slots=True)
class PreCompactDecision:
    """A pre_compact hook's answer: text the summary must keep, and/or a veto."""

    keep: str | None = None
    veto: bool = False


@dataclass(frozen=True, slots=True)
class HookVerdict:
    """Every pre_compact hook's answer together."""

    keep: tuple[str, ...] = ()
    vetoed: bool = False
    veto_refused: bool = False


PreHook = Callable[[PreCompact], Any]
PostHook = Callable[[CompactionRecord], Any]


def _decision(value: object) -> PreCompactDecision:
    """A hook may answer a decision, a string (text to keep), False (veto), or nothing."""
    if isinstance(value, PreCompactDecision):
        return value
    if isinstance(value, str):
        return PreCompactDecision(keep=value or None)
    if value is False:
        return PreCompactDecision(veto=True)
    return PreCompactDecision()


@dataclass(frozen=True, slots=True)
class Hook:
    """A hook with a name of its own for the log and, optionally, its own time limit."""

    call: Callable[[Any], Any]
    name: str
    timeout_seconds: float | None = None

    def __call__(self, arg: Any) -> Any:
        return self.call(arg)


@dataclass(slots=True)
class CompactHooks:
    """The registered hooks; ``run_pre`` and ``run_post`` never raise (but for the caller's own
    cancellation)."""

    pre: list[PreHook] = field(default_factory=list)
    post: list[PostHook] = field(default_factory=list)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    async def _run(
        self, kind: str, hook: Callable[[Any], Any], arg: object, fields: dict[str, Any]
    ) -> object:
        """The hook's answer, or None when it failed (logged once, naming it)."""
        call, name, limit = hook, _name(hook), self.timeout_seconds
        if isinstance(hook, Hook):
            call, name, limit = hook.call, hook.name, hook.timeout_seconds or limit
        outcome = await bounded_call(call, arg, limit=limit)
        if isinstance(outcome, Done):
            return outcome.value
        _log_failure(kind, name, outcome, fields)
        return None

    async def run_pre(self, event: PreCompact) -> HookVerdict:
        keep: list[str] = []
        vetoed = False
        fields = {"session": event.session.id, "trigger": event.trigger}
        for hook in self.pre:
            decision = _decision(await self._run("pre_compact", hook, event, fields))
            if decision.keep:
                keep.append(decision.keep)
            vetoed = vetoed or decision.veto
        refused = vetoed and event.overflow_imminent
        if refused:
            _log.warning(
                "pre_compact veto refused: the window would overflow (trigger %s)",
                event.trigger,
                extra=fields,
            )
        return HookVerdict(tuple(keep), vetoed and not refused, refused)

    async def run_post(self, record: CompactionRecord) -> None:
        fields = {"session": record.session_id, "trigger": record.trigger}
        for hook in self.post:
            await self._run("post_compact", hook, record, fields)


def _log_failure(kind: str, name: str, failed: Failed, fields: dict[str, Any]) -> None:
    # One record per failure: a traceback only for an ordinary exception (a bug to find in the
    # hook); a time-out or an exit says all there is in its reason.
    error = failed.error if failed.kind == "raised" else None
    exc_info = (type(error), error, error.__traceback__) if error is not None else None
    _log.error("%s hook %s failed (%s): skipped", kind, name, failed.reason, exc_info=exc_info, extra=fields)


def _name(hook: object) -> str:
    """``module:qualname`` of a function, or of the class of a callable object."""
    named = hook if hasattr(hook, "__qualname__") else type(hook)
    return f"{getattr(named, '__module__', '?')}:{getattr(named, '__qualname__', repr(hook))}"


def resolve(spec: str) -> Callable[..., Any]:
    """``"package.module:function"`` -> the function (ValueError when it is not one)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"hook {spec!r} is not 'package.module:function'")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"hook {spec!r} is not callable")
    return target  # type: ignore[no-any-return]


def load_hooks(
    configured: Mapping[str, Sequence[str] | str] | None = None,
    *,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> CompactHooks:
    """Hooks from the ``hygieia.hooks`` entry points, then from config (kind -> specs), each run
    under ``timeout_seconds``. A hook that cannot be loaded (its import raising anything, exits
    included) is logged and left out."""
    hooks = CompactHooks(timeout_seconds=timeout_seconds)
    found: list[tuple[str, Callable[[], Callable[..., Any]], str]] = []
    for ep in entry_points(group=HOOKS_GROUP):
        found.append((ep.name, ep.load, ep.value))
    for kind, specs in (configured or {}).items():
        for spec in [specs] if isinstance(specs, str) else specs:
            found.append((kind, partial(resolve, spec), spec))
    for kind, load, spec in found:
        if kind not in HOOK_KINDS:
            _log.warning("hook %s has unknown kind %r (expected one of %s): ignored", spec, kind, HOOK_KINDS)
            continue
        loaded = guarded(load)
        if isinstance(loaded, Failed):
            _log.error("hook %s could not be loaded (%s): skipped", spec, loaded.reason)
            continue
        hook = Hook(loaded.value, spec)
        (hooks.pre if kind == "pre_compact" else hooks.post).append(hook)
    return hooks
