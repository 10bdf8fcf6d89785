"""This process's cluster state in the Prometheus format, on its own port (``cluster.metrics_port``).

Exported: ``hygieia_node_info{node,role}`` (1), ``hygieia_intake_leader{lease}`` (1 while this
process leads that intake), ``hygieia_intake_lease_generation{lease}``,
``hygieia_intake_lease_seconds_left{lease}`` and ``hygieia_intake_elections_won_total{lease}``.
The admin app's ``/metrics`` shows the whole cluster from the database (gateway.cluster.view).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from agent.clock import utcnow
from gateway.cluster.election import ClusterState

_log = logging.getLogger(__name__)


class ClusterCollector:
    """Reads :class:`ClusterState` on each scrape (no gauges to keep in step)."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state

    def collect(self) -> Iterator[Any]:
        state = self._state
        info = GaugeMetricFamily("hygieia_node_info", "This process: its role.", labels=["node", "role"])
        info.add_metric([state.worker_id, state.role], 1)
        yield info
        leader = GaugeMetricFamily(
            "hygieia_intake_leader", "1 while this process leads the intake.", labels=["lease"]
        )
        generation = GaugeMetricFamily(
            "hygieia_intake_lease_generation", "Generation of the lease as last held here.", labels=["lease"]
        )
        left = GaugeMetricFamily(
            "hygieia_intake_lease_seconds_left",
            "Seconds until this process's lease runs out.",
            labels=["lease"],
        )
        won = CounterMetricFamily(
            "hygieia_intake_elections_won", "Times this process took the intake over.", labels=["lease"]
        )
        now = utcnow()
        for name, slot in state.slots.items():
            leader.add_metric([name], 1 if slot.leading else 0)
            generation.add_metric([name], slot.generation)
            seconds = (slot.expires_at - now).total_seconds() if slot.leading and slot.expires_at else 0.0
            left.add_metric([name], max(0.0, seconds))
            won.add_metric([name], slot.elections_won)
        yield from (leader, generation, left, won)


def render(state: ClusterState) -> bytes:
    """The exposition text (tests and the admin app use it without a server)."""
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(state))
    return bytes(generate_latest(registry))


class MetricsServer:
    """prometheus_client's small HTTP server in a thread; ``port`` 0 picks a free one."""

    def __init__(self, state: ClusterState, host: str, port: int) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(ClusterCollector(state))
        self._host, self._port = host, port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_port) if self._server is not None else 0

    def start(self) -> None:
        self._server, self._thread = start_http_server(self._port, self._host, self._registry)
        _log.info("cluster metrics on http://%s:%d/metrics", self._host, self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
