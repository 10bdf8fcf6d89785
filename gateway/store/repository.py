"""The store: every SQL the service runs goes through here.

:class:`Store` implements :class:`agent.storage.ConversationStore` for the agent and the
gateway-facing API (sessions, inbox, outbox, usage, audit). It is composed of one part
per concern, each in its own module; all parts share one :class:`Database`.
"""

from __future__ import annotations

from agent.storage import ConversationStore
from gateway.store.admin_ops import AdminOps
from gateway.store.api_response_ops import ApiResponseOps
from gateway.store.audit_ops import AuditOps
from gateway.store.cache_ops import CacheOps
from gateway.store.cluster_ops import ClusterOps
from gateway.store.compaction_ops import CompactionOps
from gateway.store.dead_letter_ops import DeadLetterOps
from gateway.store.delegation_ops import DelegationOps
from gateway.store.engine_ops import EngineOps
from gateway.store.erase_ops import EraseOps
from gateway.store.export_ops import ExportOps
from gateway.store.find_ops import FindOps
from gateway.store.idle_ops import IdleOps
from gateway.store.inbox_ops import InboxOps
from gateway.store.job_ops import JobOps
from gateway.store.memory_ops import MemoryOps
from gateway.store.message_ops import MessageOps
from gateway.store.outbox_ops import OutboxOps
from gateway.store.override_ops import OverrideOps
from gateway.store.rate_ops import RateOps
from gateway.store.retention_ops import RetentionOps
from gateway.store.search_ops import SearchOps
from gateway.store.session_ops import SessionOps
from gateway.store.stream_ops import StreamOps
from gateway.store.task_ops import TaskOps
from gateway.store.tool_call_ops import ToolCallOps
from gateway.store.turn_ops import TurnOps
from gateway.store.upkeep_ops import UpkeepOps
from gateway.store.usage_ops import UsageOps


class Store(
    SessionOps,
    MessageOps,
    OverrideOps,
    CompactionOps,
    SearchOps,
    InboxOps,
    OutboxOps,
    MemoryOps,
    UsageOps,
    CacheOps,
    AdminOps,
    FindOps,
    AuditOps,
    EraseOps,
    ExportOps,
    JobOps,
    IdleOps,
    TaskOps,
    UpkeepOps,
    RetentionOps,
    DeadLetterOps,
    StreamOps,
    ClusterOps,
    TurnOps,
    EngineOps,
    RateOps,
    ToolCallOps,
    DelegationOps,
    ApiResponseOps,
):
    """``Store(db)`` over a connected :class:`gateway.store.db.Database`; ``Store(db, clock=...)`` gives it
    this process's clock (see :class:`gateway.store.base.Repo`)."""


__all__ = ["Store"]


def _conforms(store: Store) -> ConversationStore:
    return store  # mypy proves Store satisfies the agent's storage protocol
