"""Compaction hooks a deployer adds without touching our code.

``pre_compact`` sees the trigger and the range about to be archived; it may return text the
summary must keep, or veto (a veto is refused when the window would otherwise overflow).
``post_compact`` sees the stored compaction record. Hooks are found under the entry-point group
``hygieia.hooks`` (entry point named ``pre_compact`` or ``post_compact``) and in config
(``hooks.pre_compact: "package.module:function"``); they may be plain or async functions. A hook
that raises is logged and skipped.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import entry_points
from typing import Any

from agent.types import AgentSession, ChatMessage, CompactionRecord, Trigger

_log = logging.getLogger(__name__)

HOOKS_GROUP = "hygieia.hooks"
HOOK_KINDS = ("pre_compact", "post_compact")


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


async def _call(hook: Callable[[Any], Any], arg: object) -> object:
    result = hook(arg)
    if inspect.isawaitable(result):
        result = await result
    return result


@dataclass(slots=True)
class CompactHooks:
    """The registered hooks; ``run_pre`` and ``run_post`` never raise."""

    pre: list[PreHook] = field(default_factory=list)
    post: list[PostHook] = field(default_factory=list)

    async def run_pre(self, event: PreCompact) -> HookVerdict:
        keep: list[str] = []
        vetoed = False
        for hook in self.pre:
            try:
                decision = _decision(await _call(hook, event))
            except Exception:
                _log.exception("pre_compact hook %s failed: skipped", _name(hook))
                continue
            if decision.keep:
                keep.append(decision.keep)
            vetoed = vetoed or decision.veto
        refused = vetoed and event.overflow_imminent
        if refused:
            _log.warning(
                "pre_compact veto refused: the window would overflow (trigger %s)",
                event.trigger,
                extra={"session": event.session.id, "trigger": event.trigger},
            )
        return HookVerdict(tuple(keep), vetoed and not refused, refused)

    async def run_post(self, record: CompactionRecord) -> None:
        for hook in self.post:
            try:
                await _call(hook, record)
            except Exception:
                _log.exception("post_compact hook %s failed: skipped", _name(hook))


def _name(hook: object) -> str:
    return f"{getattr(hook, '__module__', '?')}:{getattr(hook, '__qualname__', repr(hook))}"


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


def load_hooks(configured: Mapping[str, Sequence[str] | str] | None = None) -> CompactHooks:
    """Hooks from the ``hygieia.hooks`` entry points, then from config (kind -> specs). A hook
    that cannot be loaded is logged and left out."""
    hooks = CompactHooks()
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
        try:
            hook = load()
        except Exception:
            _log.exception("hook %s could not be loaded: skipped", spec)
            continue
        (hooks.pre if kind == "pre_compact" else hooks.post).append(hook)
    return hooks
