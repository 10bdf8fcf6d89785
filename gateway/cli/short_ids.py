"""Session ids as people type them: the whole id, or any start of it that names one session.

``hygieia sessions search`` and ``show`` print the first 12 characters of an id; ``show``,
``export`` and ``restore`` (and ``search --session``) take that back. An unknown start is one
line; an ambiguous one lists the sessions it could mean, so the next try can be exact.
"""

from __future__ import annotations

from agent.errors import NotFound
from gateway.cli.common import DetailedError, when
from gateway.store.repository import Store

SHORT_ID = 12
"""How many characters of a session id the CLI prints."""
SHOWN_CANDIDATES = 10


class AmbiguousSessionId(DetailedError):
    """A start of an id that several sessions share; ``details`` lists them."""


async def resolve_session_id(store: Store, given: str) -> str:
    """The one session id that starts with ``given``; NotFound or AmbiguousSessionId otherwise."""
    found, total = await store.sessions_by_prefix(given, limit=SHOWN_CANDIDATES)
    if total == 0:
        raise NotFound(f"no session id starts with {given.strip()!r} (`hygieia sessions list` shows them)")
    if total == 1:
        return found[0].id
    lines = [
        f"{s.id}  {s.key}  last activity {when(s.last_activity_at)}" + ("  (ended)" if s.ended else "")
        for s in found
    ]
    if total > len(found):
        lines.append(f"... and {total - len(found)} more")
    raise AmbiguousSessionId(
        f"{total} sessions have ids starting with {given.strip()!r}; give more of the id:", lines
    )
