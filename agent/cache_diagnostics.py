"""Cache diagnostics: each chat call names the session's previous response, the API says why the
cache prefix could not be reused, and we say whether we broke it ourselves.

The API keeps a fingerprint of every request that carries ``diagnostics`` (model, system, tools,
messages) keyed by its response ``id``; the next request names that id in
``diagnostics.previous_message_id`` and the response's ``diagnostics.cache_miss_reason`` tells
where the two diverged (docs/models-and-cost.md, "Cache diagnostics"). The chain lives in the
session's context state, so it survives a restart.

Our own side of a miss (:data:`Cause`) is read off what we sent last time: a new session, another
model, another tool catalog, or a view whose earlier messages we rewrote (a compaction). A miss
with one of these causes is expected; a miss with cause ``none`` is waste worth a look.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from agent.provider import LLMRequest, LLMResponse
from agent.types import CacheCheck, ChatMessage, ContextState

STATE_KEY = "cache_diagnostics"
"""Where the session's chain is kept in :attr:`ContextState.extra`."""

MISS_REASONS = (
    "model_changed",
    "system_changed",
    "tools_changed",
    "messages_changed",
    "previous_message_not_found",
    "unavailable",
)
"""The ``cache_miss_reason.type`` values the API names."""

FIRST_CALL = "first_call"
"""Our reason for a session's first call when it wrote the cache and read none: no previous
response to compare with, so the API names no reason."""

EXPIRED = "expired"
"""Our reason for a call whose prefix matched the previous request (the API named no divergence)
yet read nothing from the cache while writing it again, after a quiet time longer than the TTL
we chose: the entry lapsed (cause ``ttl``)."""

UNREAD = "unread"
"""The same within the TTL: the entry was evicted, or the breakpoint moved past the blocks the
API looks back over (cause ``none``: worth a look)."""

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}

OTHER = "other"
"""A reason type this build does not know (kept apart, never copied from the wire)."""

Cause = Literal["compaction", "catalog", "model", "new_session", "ttl", "none"]
CAUSES: tuple[Cause, ...] = ("compaction", "catalog", "model", "new_session", "ttl", "none")

_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")


@dataclass(frozen=True, slots=True)
class Sent:
    """What we know of the last request we sent, enough to tell our own prefix breaks."""

    response_id: str | None
    model: str
    tools: str
    compactions: int
    count: int
    last_id: int | None
    at: datetime | None = None
    ttl: str | None = None
    """The cache TTL that call was sent with (its prefix lives that long; "none": uncached)."""

    def values(self) -> dict[str, Any]:
        return {
            "ttl": self.ttl,
            "at": self.at.isoformat() if self.at is not None else None,
            "previous_message_id": self.response_id,
            "model": self.model,
            "tools": self.tools,
            "compactions": self.compactions,
            "count": self.count,
            "last_id": self.last_id,
        }


def previous(state: ContextState) -> Sent | None:
    """The session's last diagnosed call, as its state keeps it (None before the first)."""
    kept = state.extra.get(STATE_KEY)
    if not isinstance(kept, Mapping):
        return None
    response_id = kept.get("previous_message_id")
    count, last_id, compactions = kept.get("count"), kept.get("last_id"), kept.get("compactions")
    return Sent(
        response_id=response_id if isinstance(response_id, str) and _ID.fullmatch(response_id) else None,
        model=str(kept.get("model") or ""),
        tools=str(kept.get("tools") or ""),
        compactions=compactions if isinstance(compactions, int) else -1,
        count=count if isinstance(count, int) else 0,
        last_id=last_id if isinstance(last_id, int) else None,
        at=_when(kept.get("at")),
        ttl=ttl if isinstance(ttl := kept.get("ttl"), str) else None,
    )


def _when(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def tools_digest(tools: Sequence[Mapping[str, Any]]) -> str:
    """A short digest of the tools sent: names, deferral, descriptions and parameter names (what
    a catalog change moves), without serializing every schema on every call."""
    parts = []
    for tool in tools:
        schema = tool.get("input_schema")
        params = schema.get("properties") if isinstance(schema, Mapping) else None
        names = ",".join(sorted(params)) if isinstance(params, Mapping) else ""
        parts.append(
            f"{tool.get('name')}|{int(bool(tool.get('defer_loading')))}|{tool.get('description')}|{names}"
        )
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def our_cause(
    before: Sent | None, request: LLMRequest, view: Sequence[ChatMessage], state: ContextState
) -> Cause:
    """Whether this request breaks the cached prefix by our own doing, and how."""
    if before is None or before.response_id is None:
        return "new_session"
    if before.model != request.model:
        return "model"
    if before.tools != tools_digest(request.tools):
        return "catalog"
    if before.compactions != state.compaction_count:
        return "compaction"
    # The messages sent last time must still open the view: else we rewrote them.
    if before.count > len(view) or (before.count and view[before.count - 1].id != before.last_id):
        return "compaction"
    return "none"


def sent_now(
    request: LLMRequest,
    view: Sequence[ChatMessage],
    state: ContextState,
    response_id: str,
    at: datetime,
    ttl: str | None = None,
) -> Sent:
    """What to remember of the call just answered."""
    return Sent(
        at=at,
        ttl=ttl,
        response_id=response_id,
        model=request.model,
        tools=tools_digest(request.tools),
        compactions=state.compaction_count,
        count=len(view),
        last_id=view[-1].id if view else None,
    )


def remember(state: ContextState, sent: Sent) -> None:
    state.extra[STATE_KEY] = sent.values()


def check_of(
    miss: tuple[str, int | None] | None,
    cause: Cause,
    cache_read: int,
    cache_write: int,
    *,
    lapsed: bool = False,
) -> CacheCheck:
    """The call's cache check as stored: the API's reason, or ours where it names none and the
    call read nothing while writing (:data:`FIRST_CALL` on a session's first call, :data:`EXPIRED`
    with cause ``ttl`` when the quiet time outlasted the TTL we chose: ``lapsed``, else
    :data:`UNREAD`); and whether the miss is of our making."""
    reason, missed = miss if miss is not None else (None, None)
    if reason is None and cache_read == 0 and cache_write > 0:
        if cause == "new_session":
            reason = FIRST_CALL
        elif lapsed:
            reason, cause = EXPIRED, "ttl"
        else:
            reason = UNREAD
    ours = reason is not None and cause != "none"
    return CacheCheck(reason=reason, missed_tokens=missed, cause=cause, ours=ours)


def read_reason(diagnostics: Any) -> tuple[str, int | None] | None:
    """``(reason, missed tokens)`` from a response's ``diagnostics`` (None: no divergence, or
    the comparison still running); a malformed or unknown one reads as :data:`OTHER`."""
    if diagnostics is None:
        return None
    if not isinstance(diagnostics, Mapping):
        return OTHER, None
    reason = diagnostics.get("cache_miss_reason")
    if reason is None:
        return None
    if not isinstance(reason, Mapping):
        return OTHER, None
    kind = reason.get("type")
    missed = reason.get("cache_missed_input_tokens")
    tokens = (
        missed if isinstance(missed, int) and not isinstance(missed, bool) and 0 <= missed < 10**12 else None
    )
    return (kind if kind in MISS_REASONS else OTHER), tokens


def diagnosed(
    request: LLMRequest, state: ContextState, view: Sequence[ChatMessage]
) -> tuple[LLMRequest, Cause]:
    """``request`` carrying ``diagnostics`` (the session's previous response id, null on its first
    call), and our own cause, should its prefix miss."""
    before = previous(state)
    cause = our_cause(before, request, view, state)
    prior = before.response_id if before is not None else None
    return replace(request, diagnostics={"previous_message_id": prior}), cause


def learned(
    state: ContextState,
    request: LLMRequest,
    view: Sequence[ChatMessage],
    response: LLMResponse,
    cause: Cause,
    ttl: str | None,
    now: datetime,
) -> CacheCheck | None:
    """The answered call's :class:`CacheCheck`, the chain moved on to its response (None: the
    request carried no diagnostics). ``ttl``: the cache TTL the call was sent with."""
    if request.diagnostics is None:
        return None
    before = previous(state)
    # The previous call's prefix lives as long as the TTL IT was written with ("none": it was
    # sent uncached, so nothing of it was kept: our policy's choice).
    written = (before.ttl or ttl) if before is not None else None
    quiet = (now - before.at).total_seconds() if before is not None and before.at is not None else None
    lapsed = written == "none" or (
        quiet is not None and written is not None and quiet >= TTL_SECONDS.get(written, 300.0)
    )
    if response.id is not None and _ID.fullmatch(response.id):
        remember(state, sent_now(request, view, state, response.id, now, ttl or "none"))
    usage = response.usage
    return check_of(
        response.cache_miss,
        cause,
        usage.cache_read_input_tokens,
        usage.cache_creation_input_tokens,
        lapsed=lapsed,
    )
