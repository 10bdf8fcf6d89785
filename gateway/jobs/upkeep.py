"""The daily ``upkeep`` job: database housekeeping and pruning (``scheduler.upkeep``), each step
reporting what it did; see :mod:`gateway.store.upkeep_ops`."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from gateway.config import UpkeepSettings
from gateway.store.repository import Store

_log = logging.getLogger(__name__)


class Upkeep:
    def __init__(self, settings: UpkeepSettings, store: Store) -> None:
        self._settings = settings
        self._store = store

    def describe(self) -> str:
        return (
            f"prunes finished queue rows after {self._settings.prune_after_days} days, optimizes the database"
        )

    async def run(self, now: datetime) -> dict[str, int]:
        cutoff = now - timedelta(days=self._settings.prune_after_days)
        pruned = await self._store.prune_finished(before=cutoff)
        pruned["rate_scopes_pruned"] = await self._store.rate_prune()
        _log.log(
            logging.INFO if any(pruned.values()) else logging.DEBUG,
            "upkeep pruned %d inbox, %d outbox and %d task rows finished before %s, %d idle rate scopes",
            pruned["inbox_pruned"],
            pruned["outbox_pruned"],
            pruned["tasks_pruned"],
            f"{cutoff:%Y-%m-%d}",
            pruned["rate_scopes_pruned"],
            extra=pruned,
        )
        engine = await self._store.optimize_engine()
        _log.info("upkeep optimized the database: %s", engine, extra=engine)
        return {**pruned, **engine}
