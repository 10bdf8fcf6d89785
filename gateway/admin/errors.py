"""What the admin answers 400 or 409 to: errors raised by its own routes and actions."""

from __future__ import annotations

from datetime import UTC, datetime

from agent.errors import HygieiaError


class BadRequest(HygieiaError):
    """A parameter or body that cannot be acted on (400, the message says why)."""


class Conflict(HygieiaError):
    """The request is fine but the session's state forbids it now (409), e.g. a turn is running."""


def utc_time(value: datetime | None, name: str) -> datetime | None:
    """``value`` as aware UTC (naive = UTC already); BadRequest when it has no UTC equivalent."""
    if value is None:
        return None
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        return aware.astimezone(UTC)
    except OverflowError:
        raise BadRequest(f"{name}: {value.isoformat()} is out of range") from None
