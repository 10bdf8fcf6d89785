"""What one ``hygieia run`` process does in a cluster: its role, checked against the database."""

from __future__ import annotations

from typing import Literal, get_args

from agent.errors import ConfigError

Role = Literal["all", "intake", "worker"]
ROLES: tuple[str, ...] = get_args(Role)

INTAKE_LEASE_PREFIX = "intake:"
NODE_LEASE_PREFIX = "node:"


def check_role(role: str, dialect: str) -> Role:
    """``role`` when this database can run it; :class:`ConfigError` (one line) otherwise.

    SQLite is one process with no election, so only ``all`` makes sense there: an ``intake``
    alone would store messages nobody serves, a ``worker`` alone would serve nothing.
    """
    if role not in ROLES:
        raise ConfigError(f"--role: unknown role {role!r}; choose all, intake or worker")
    if role != "all" and dialect != "postgresql":
        raise ConfigError(
            f"--role {role} needs PostgreSQL (HYGIEIA_DATABASE_URL); SQLite runs one process with --role all"
        )
    return role  # type: ignore[return-value]  # checked against ROLES above


def clustered(role: Role, dialect: str) -> bool:
    """True when intakes are elected and replies go out through send-only adapters (PostgreSQL)."""
    return dialect == "postgresql"


def runs_intake(role: Role) -> bool:
    return role in ("all", "intake")


def runs_worker(role: Role) -> bool:
    return role in ("all", "worker")


def intake_lease(platform: str, part: str | None = None) -> str:
    """The lease one platform's (or one shard group's) intake leader holds."""
    return f"{INTAKE_LEASE_PREFIX}{platform}" + (f":{part}" if part else "")


def node_lease(role: str, worker_id: str) -> str:
    """The heartbeat lease of one process: ``node:<role>:<worker id>``."""
    return f"{NODE_LEASE_PREFIX}{role}:{worker_id}"


def parse_node_lease(name: str) -> tuple[str, str] | None:
    """``(role, worker id)`` of a node lease name, else None."""
    if not name.startswith(NODE_LEASE_PREFIX):
        return None
    role, _, worker = name.removeprefix(NODE_LEASE_PREFIX).partition(":")
    return (role, worker) if worker else None
