"""Random sequences of append / compact / restore keep the storage invariants.

The store is compared, after every step, with a small independent model of the
semantics in the brief (seq = max + 1; an insertion takes its anchor's seq and the next
sub_seq; restore reactivates what the latest compaction archived and retires what it
produced).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from agent.errors import NotFound
from agent.types import ChatMessage
from gateway.store.models import messages
from gateway.store.repository import Store
from tests.store.engines import only
from tests.store.helpers import new_session, summary_plan

Op = tuple[str, int, int]
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.just(0)),
        st.tuples(st.just("compact"), st.integers(0, 50), st.integers(0, 50)),
        st.tuples(st.just("restore"), st.just(0), st.just(0)),
    ),
    min_size=1,
    max_size=14,
)


@dataclass
class Row:
    seq: int
    sub: int
    text: str
    active: bool = True
    archived_by: str | None = None
    produced_by: str | None = None


@dataclass
class Model:
    rows: dict[int, Row] = field(default_factory=dict)
    compactions: list[tuple[str, int | None]] = field(default_factory=list)  # (id, summary id)
    restored: set[str] = field(default_factory=set)

    def active_ids(self) -> list[int]:
        live = [(r.seq, r.sub, i) for i, r in self.rows.items() if r.active]
        return [i for _, _, i in sorted(live)]


async def active_keys(store: Store, session_id: str) -> list[tuple[int, int]]:
    stmt = (
        select(messages.c.seq, messages.c.sub_seq)
        .where(messages.c.session_id == session_id, messages.c.active)
        .order_by(messages.c.seq, messages.c.sub_seq)
    )
    async with store.db.transaction(write=False) as s:
        return [(int(a), int(b)) for a, b in (await s.execute(stmt))]


async def step(store: Store, sid: str, model: Model, op: Op, counter: list[int]) -> None:
    kind, a, b = op
    if kind == "append":
        for _ in range(a):
            counter[0] += 1
            text = f"note{counter[0]}"
            stored = await store.append_message(sid, ChatMessage.user(text))
            assert stored.id is not None
            seq = max((r.seq for r in model.rows.values()), default=0) + 1
            model.rows[stored.id] = Row(seq=seq, sub=0, text=text)
    elif kind == "compact":
        view = await store.load_active(sid)
        if len(view) < 2:
            return
        start = a % (len(view) - 1)
        length = 1 + b % (len(view) - start)
        archive = view[start : start + length]
        summary_text = f"summary{len(model.compactions)}"
        record = await store.archive_and_summarize(sid, summary_plan(archive, summary_text))
        anchor = model.rows[archive[0].id or 0]
        for m in archive:
            row = model.rows[m.id or 0]
            row.active, row.archived_by = False, record.id
        sub = max(r.sub for r in model.rows.values() if r.seq == anchor.seq) + 1
        assert record.summary_message_id is not None
        model.rows[record.summary_message_id] = Row(anchor.seq, sub, summary_text, produced_by=record.id)
        model.compactions.append((record.id, record.summary_message_id))
    else:
        pending = [cid for cid, _ in model.compactions if cid not in model.restored]
        if not pending:
            with pytest.raises(NotFound):
                await store.restore_latest_compaction(sid)
            return
        restored = await store.restore_latest_compaction(sid)
        assert restored.id == pending[-1]
        for row in model.rows.values():
            if row.archived_by == restored.id:
                row.active, row.archived_by = True, None
            if row.produced_by == restored.id:
                row.active = False
        model.restored.add(restored.id)


async def check(store: Store, sid: str, model: Model) -> None:
    view = await store.load_active(sid)
    assert [m.id for m in view] == model.active_ids()
    keys = await active_keys(store, sid)
    assert all(x < y for x, y in itertools.pairwise(keys)), "active view order must strictly increase"
    for mid, row in model.rows.items():
        stored = await store.get_message(mid)
        assert (stored.text, stored.active, stored.compaction_id) == (row.text, row.active, row.archived_by)
    # Exactly one active summary per compaction that is neither restored nor superseded.
    live = [
        s
        for cid, s in model.compactions
        if cid not in model.restored and model.rows[s or 0].archived_by is None
    ]
    assert sorted(m.id or 0 for m in view if m.kind == "summary") == sorted(s or 0 for s in live)


async def run(store: Store, ops: list[Op]) -> None:
    sid = await new_session(store, f"hypothesis:{id(ops)}")
    model, counter = Model(), [0]
    for op in ops:
        await step(store, sid, model, op, counter)
        await check(store, sid, model)
    await store.end_session(sid, "done")


FIXTURE_REUSE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@only("sqlite")
@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE_REUSE)
@given(ops=OPERATIONS)
async def test_random_operations_keep_invariants_sqlite(store: Store, ops: list[Op]) -> None:
    await run(store, ops)


@only("postgresql")
@settings(max_examples=8, deadline=None, suppress_health_check=FIXTURE_REUSE)
@given(ops=OPERATIONS)
async def test_random_operations_keep_invariants_postgres(store: Store, ops: list[Op]) -> None:
    await run(store, ops)


@pytest.mark.full
@settings(max_examples=300, deadline=None, suppress_health_check=FIXTURE_REUSE)
@given(
    ops=st.lists(OPERATIONS.map(tuple), min_size=1, max_size=3).map(
        lambda chunks: [o for c in chunks for o in c]
    )
)
async def test_random_operations_keep_invariants_full(store: Store, ops: list[Op]) -> None:
    await run(store, ops)
