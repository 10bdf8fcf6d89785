"""A conversation with its own summary model (a chat override) is summarized by that model."""

from __future__ import annotations

from dataclasses import replace

from agent.compaction import compact
from tests.agent.loop_support import SUMMARY_MODEL, exchanges, make_session, rig

OWN = "claude-opus-4-6"


async def test_the_sessions_summary_model_writes_its_summary() -> None:
    async with rig(
        session=replace(make_session(context_window=20_000), summary_model=OWN), context_window=20_000
    ) as r:
        await r.preload(exchanges(40, chars=600))
        result = await compact(r.loop._engine, r.store, r.session, trigger="manual")
        assert result.record is not None
        assert result.record.model == OWN
    assert [b["model"] for b in r.script.summary_bodies] == [OWN]


async def test_without_one_the_engines_summary_model_writes_it() -> None:
    async with rig(session=make_session(context_window=20_000), context_window=20_000) as r:
        await r.preload(exchanges(40, chars=600))
        await compact(r.loop._engine, r.store, r.session, trigger="manual")
    assert [b["model"] for b in r.script.summary_bodies] == [SUMMARY_MODEL]
