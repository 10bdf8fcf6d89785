"""The ``retention`` job (off by default): archived messages older than
``scheduler.retention.archived_days`` are deleted, daily at ``scheduler.retention.at``; see
:mod:`gateway.store.retention_ops` for what is never deleted."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from gateway.config import Settings
from gateway.store.repository import Store

_log = logging.getLogger(__name__)


def retention_policy(settings: Settings) -> str:
    """The policy in one line (``hygieia doctor`` shows it)."""
    policy = settings.scheduler.retention
    if not policy.enabled:
        return "off: every message is kept (archived ones too)"
    return (
        f"on: archived messages older than {policy.archived_days} days are deleted daily at {policy.at} "
        f"({settings.timezone}); active messages and summaries are kept"
    )


class Retention:
    def __init__(self, days: int, store: Store) -> None:
        self._days = days
        self._store = store

    async def run(self, now: datetime) -> dict[str, int]:
        cutoff = now - timedelta(days=self._days)
        report = await self._store.delete_archived(before=cutoff)
        _log.log(
            logging.INFO if any(report.values()) else logging.DEBUG,
            "retention deleted %d archived messages of %d compactions (archived messages older than %d days)",
            report["messages_deleted"],
            report["compactions_pruned"],
            self._days,
            extra=report,
        )
        return report
