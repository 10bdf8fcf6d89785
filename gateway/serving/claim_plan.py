"""What the inbox claim does for a key inside its own transaction, beyond claiming.

``TurnOps.claim_turn`` takes two pure functions: the plan (the claimed items' messages, appended
there when they are all plain) and the opening (how to open the key's first session there). Both
run inside the claim's transaction, on SQLite in a worker thread, so they touch nothing but their
arguments and this object; the items they parse are kept for the drain, so each row is parsed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.types import ChatMessage
from gateway.serving.inbound import InboxItem, parse_item
from gateway.serving.sessions import SessionDirectory
from gateway.serving.turns import TurnServer
from gateway.store.records import InboxRecord, SessionInfo
from gateway.store.session_ops import SessionOpening


@dataclass
class PlannedClaim:
    """One claim's plan and opening for ``key``; ``parsed`` holds the items they parsed, by id."""

    key: str
    turns: TurnServer
    directory: SessionDirectory
    parsed: dict[int, InboxItem] = field(default_factory=dict)

    def plan(self, records: list[InboxRecord], info: SessionInfo) -> list[ChatMessage] | None:
        """The plain-messages check (:meth:`TurnServer.prebuild`)."""
        items = self._parse_all(records)
        return None if items is None else self.turns.prebuild(items, info)

    def opening(self, records: list[InboxRecord]) -> SessionOpening | None:
        """The key's first session, opened from its first item as the general path would, when
        the items are plain messages (their turn is sure to need it)."""
        items = self._parse_all(records)
        if not items or self.turns.prebuild(items, None) is None:
            return None
        return self.directory.opening(self.key, items[0])

    def _parse_all(self, records: list[InboxRecord]) -> list[InboxItem] | None:
        """The rows as items; None when one does not parse (the drain sets that row apart)."""
        try:
            items = [self.parsed.get(r.id) or parse_item(r) for r in records]
        except ValueError:
            return None
        self.parsed.update((item.id, item) for item in items)
        return items
