"""The cluster in the admin app: /api/cluster and the cluster gauges in /metrics."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from gateway.cluster.node import NodeHeartbeat
from gateway.cluster.roles import intake_lease, node_lease
from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client

LEADER = "host-a:101:aaaa"
WORKER = "host-b:202:bbbb"


async def seed_cluster(store: Store) -> None:
    await store.lease_acquire(node_lease("all", LEADER), LEADER, ttl_seconds=60)
    await store.lease_acquire(node_lease("worker", WORKER), WORKER, ttl_seconds=60)
    await store.lease_acquire(intake_lease("telegram"), LEADER, ttl_seconds=60)
    await store.inbox_put(
        platform="telegram",
        chat_id="42",
        platform_message_id="1",
        session_key="telegram:dm:42",
        payload={"text": "hi", "user_id": "42"},
        addressed=True,
    )
    claimed = await store.inbox_claim(worker=WORKER, lease_seconds=60, session_key="telegram:dm:42")
    assert len(claimed) == 1


async def test_cluster_shows_nodes_intake_leaders_and_served_sessions(store: Store) -> None:
    await seed_cluster(store)
    async with admin_client(store) as client:
        response = await client.get("/api/cluster")
    assert response.status_code == 200
    body = response.json()
    nodes = {node["node"]: node for node in body["nodes"]}
    assert nodes[LEADER]["role"] == "all" and nodes[LEADER]["leads"] == ["telegram"]
    assert nodes[WORKER]["role"] == "worker" and nodes[WORKER]["sessions"] == ["telegram:dm:42"]
    assert all(node["live"] for node in nodes.values())
    [intake] = body["intakes"]
    assert intake["intake"] == "telegram" and intake["holder"] == LEADER and intake["generation"] == 1
    assert body["sessions"] == [
        {
            "session_key": "telegram:dm:42",
            "node": WORKER,
            "items": 1,
            "lease_until": body["sessions"][0]["lease_until"],
        }
    ]


async def test_cluster_needs_the_admin_token(store: Store) -> None:
    async with admin_client(store, authed=False) as client:
        assert (await client.get("/api/cluster")).status_code == 401


async def test_metrics_export_the_cluster(store: Store) -> None:
    await seed_cluster(store)
    async with admin_client(store) as client:
        text = (await client.get("/metrics")).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("hygieia_cluster_node", (("node", WORKER), ("role", "worker")))] == 1
    assert samples[("hygieia_cluster_intake_holder", (("intake", "telegram"), ("node", LEADER)))] == 1
    assert samples[("hygieia_cluster_sessions_served", (("node", WORKER),))] == 1
    assert samples[("hygieia_cluster_intake_generation", (("intake", "telegram"),))] == 1


async def test_a_node_heartbeat_is_live_while_running_and_not_after_stop(store: Store) -> None:
    beat = NodeHeartbeat(store, "worker", WORKER, ttl_seconds=30)
    await beat.start()
    async with admin_client(store) as client:
        assert [n["live"] for n in (await client.get("/api/cluster")).json()["nodes"]] == [True]
        await beat.stop()
        assert [n["live"] for n in (await client.get("/api/cluster")).json()["nodes"]] == [False]
