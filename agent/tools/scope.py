"""Who a turn serves, as the tool registry sees it: which tools that chat may be offered."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Glob patterns over a server's own tool names: kept if any ``include`` matches (none = all)
    and no ``exclude`` does."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def keeps(self, name: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)


@dataclass(frozen=True, slots=True)
class ToolScope:
    """Who a turn serves: what ``allow:`` rules and per-chat filters are matched against."""

    platform: str = ""
    user_id: str = ""
    chat_id: str = ""
    is_admin: bool = False
    tools: ToolFilter = field(default_factory=ToolFilter)
    """The chat's own narrowing (an ``overrides:`` entry's ``tools:``), over the wire names."""

    def allowed_by(self, allow: Sequence[str]) -> bool:
        """Whether a server with ``allow`` rules serves this turn (no rules: admins only)."""
        if not allow:
            return self.is_admin
        for rule in allow:
            if rule == "*":
                return True
            if self.platform and rule in (
                f"user:{self.platform}:{self.user_id}",
                f"chat:{self.platform}:{self.chat_id}",
            ):
                return True
        return False


ADMIN_SCOPE = ToolScope(is_admin=True)
"""A scope every server's default rule admits (a library caller, a test, the doctor)."""
