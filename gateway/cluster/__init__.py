"""Scale-out on PostgreSQL: process roles, one elected intake per platform, node heartbeats.

PostgreSQL is the coordinator (no home-made cluster protocol): leadership and liveness are
named leases (:mod:`gateway.store.lease_ops`, generation-fenced), inbox and outbox claims are
rows. See docs/operations.md, "Scale-out".
"""
