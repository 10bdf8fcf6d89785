"""Prometheus gauges of the admin app, in a registry of its own, computed from the store on scrape."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import get_args

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from agent.types import Trigger
from gateway.store.admin_ops import StoreTotals
from gateway.store.cache_ops import MissLabels
from gateway.store.engine_ops import StrategyTotals

# Every built-in strategy is exported even before it first runs, so a dashboard's series exist.
KNOWN_STRATEGIES = (
    "snip",
    "cold_prune",
    "prune",
    "server_clearing",
    "server_compaction",
    "summary",
    "sliding",
    "reactive",
)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class _CacheMisses(Collector):
    """``hygieia_cache_misses_total{reason,cause,ours}``: a counter read off the usage rows (they
    are only ever added), as of the last :meth:`AdminMetrics.render`."""

    def __init__(self) -> None:
        self.counts: Mapping[MissLabels, int] = {}

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "hygieia_cache_misses",
            "Chat calls whose cached prefix missed, by the API's reason, our own cause "
            "(compaction, catalog, model, new_session, none) and whether the miss was ours.",
            labels=["reason", "cause", "ours"],
        )
        for (reason, cause, ours), n in sorted(self.counts.items()):
            family.add_metric([reason, cause, "true" if ours else "false"], n)
        yield family


class AdminMetrics:
    """``render(totals)`` sets every gauge from one snapshot and returns the exposition text."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._sessions = Gauge(
            "hygieia_sessions", "Sessions, current or ended.", ["state"], registry=self.registry
        )
        self._messages = Gauge(
            "hygieia_messages",
            "Messages in the active view, or archived by a compaction.",
            ["state"],
            registry=self.registry,
        )
        self._compactions = Gauge(
            "hygieia_compactions", "Compactions ever made, by trigger.", ["trigger"], registry=self.registry
        )
        self._strategy_runs = Gauge(
            "hygieia_strategy_runs",
            "Compactions made by each strategy of the context engine.",
            ["strategy"],
            registry=self.registry,
        )
        self._strategy_freed = Gauge(
            "hygieia_strategy_tokens_freed",
            "Prompt tokens freed by each strategy of the context engine (before - after, summed).",
            ["strategy"],
            registry=self.registry,
        )
        self._engine_failures = Gauge(
            "hygieia_context_engine_failures",
            "Times a context engine raised, timed out or planned something invalid (the built-in served).",
            ["engine", "kind"],
            registry=self.registry,
        )

        self._refusals = Gauge(
            "hygieia_refusals",
            "Replies the model declined (stop_reason refusal), by the category the API named.",
            ["category"],
            registry=self.registry,
        )

        self._misses = _CacheMisses()
        self.registry.register(self._misses)

    def render(
        self,
        totals: StoreTotals,
        strategies: StrategyTotals | None = None,
        misses: Mapping[MissLabels, int] | None = None,
    ) -> bytes:
        self._misses.counts = dict(misses or {})
        self._sessions.labels(state="current").set(totals.sessions_current)
        self._sessions.labels(state="ended").set(totals.sessions_ended)
        self._messages.labels(state="active").set(totals.messages_active)
        self._messages.labels(state="archived").set(totals.messages_archived)
        # Every known trigger is always exported (0 when unused), so a dashboard's series exist.
        counts = dict.fromkeys(get_args(Trigger), 0) | totals.compactions_by_trigger
        for trigger, n in counts.items():
            self._compactions.labels(trigger=trigger).set(n)
        for category, n in totals.refusals_by_category.items():
            self._refusals.labels(category=category).set(n)
        strategies = strategies or StrategyTotals()
        for name in dict.fromkeys([*KNOWN_STRATEGIES, *strategies.runs]):
            self._strategy_runs.labels(strategy=name).set(strategies.runs.get(name, 0))
            self._strategy_freed.labels(strategy=name).set(strategies.tokens_freed.get(name, 0))
        for (engine, kind), n in strategies.engine_failures.items():
            self._engine_failures.labels(engine=engine, kind=kind).set(n)
        return generate_latest(self.registry)
