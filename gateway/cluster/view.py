"""The cluster as the admin sees it, read from SQL (the admin is a process of its own).

Nodes are the live (or recently expired) ``node:`` heartbeat leases, intakes the ``intake:``
leases, and sessions being served the live inbox claims; all three name the same worker id
(``host:pid:random``), which is how they are joined.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from gateway.cluster.roles import INTAKE_LEASE_PREFIX, NODE_LEASE_PREFIX, parse_node_lease
from gateway.store.repository import Store

RECENT = timedelta(minutes=10)
"""A node that stopped beating this recently is still listed (as not live)."""


async def cluster_view(store: Store, now: datetime | None = None) -> dict[str, Any]:
    """``/api/cluster``: nodes, intake leaders, and which sessions are being served where."""
    now = now or await store.db_now()  # leases expire on the database's clock
    nodes: dict[str, dict[str, Any]] = {}
    for lease in await store.lease_list(NODE_LEASE_PREFIX):
        parsed = parse_node_lease(lease.name)
        if parsed is None or lease.expires_at < now - RECENT:
            continue
        role, worker = parsed
        nodes[worker] = {
            "node": worker,
            "role": role,
            "live": lease.live(now),
            "started_at": lease.acquired_at.isoformat(),
            "last_seen": lease.renewed_at.isoformat(),
            "leads": [],
            "sessions": [],
        }
    intakes = []
    for lease in await store.lease_list(INTAKE_LEASE_PREFIX):
        live = lease.live(now)
        intakes.append(
            {
                "intake": lease.name.removeprefix(INTAKE_LEASE_PREFIX),
                "lease": lease.name,
                "holder": lease.owner if live else None,
                "generation": lease.generation,
                "live": live,
                "expires_in": round((lease.expires_at - now).total_seconds(), 1),
                "since": lease.acquired_at.isoformat(),
            }
        )
        if live and lease.owner in nodes:
            nodes[lease.owner]["leads"].append(lease.name.removeprefix(INTAKE_LEASE_PREFIX))
    sessions = []
    for claim in await store.session_claims(now):
        sessions.append(
            {
                "session_key": claim.session_key,
                "node": claim.worker,
                "items": claim.items,
                "lease_until": claim.lease_until.isoformat(),
            }
        )
        if claim.worker in nodes:
            nodes[claim.worker]["sessions"].append(claim.session_key)
    return {"nodes": list(nodes.values()), "intakes": intakes, "sessions": sessions}


class _ClusterCollector:
    def __init__(self, view: dict[str, Any]) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        nodes = GaugeMetricFamily(
            "hygieia_cluster_node", "1 per live node, by role (from heartbeats).", labels=["node", "role"]
        )
        for node in self._view["nodes"]:
            if node["live"]:
                nodes.add_metric([node["node"], node["role"]], 1)
        holder = GaugeMetricFamily(
            "hygieia_cluster_intake_holder", "1 for the node leading each intake.", labels=["intake", "node"]
        )
        left = GaugeMetricFamily(
            "hygieia_cluster_intake_lease_seconds_left", "Until the intake lease runs out.", labels=["intake"]
        )
        generation = GaugeMetricFamily(
            "hygieia_cluster_intake_generation", "Times the intake changed hands + 1.", labels=["intake"]
        )
        for intake in self._view["intakes"]:
            if intake["holder"]:
                holder.add_metric([intake["intake"], intake["holder"]], 1)
            left.add_metric([intake["intake"]], max(0.0, intake["expires_in"]))
            generation.add_metric([intake["intake"]], intake["generation"])
        served = GaugeMetricFamily(
            "hygieia_cluster_sessions_served", "Sessions being served now, by node.", labels=["node"]
        )
        counts: dict[str, int] = {}
        for session in self._view["sessions"]:
            counts[session["node"]] = counts.get(session["node"], 0) + 1
        for node, n in counts.items():
            served.add_metric([node], n)
        yield from (nodes, holder, left, generation, served)


async def cluster_metrics(store: Store) -> bytes:
    """The cluster's gauges in the Prometheus text format (appended to the admin's ``/metrics``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ClusterCollector(await cluster_view(store)))
    return bytes(generate_latest(registry))
