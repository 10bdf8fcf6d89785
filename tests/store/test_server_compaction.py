"""The API's compaction block through the SQL store: stored like our summaries, loaded back byte
for byte (the API checks its content and signature), and what it replaced still searchable."""

from __future__ import annotations

import json

from agent.compaction import compact
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.settings import CompressionSettings, LLMSettings
from agent.tools import default_registry
from agent.types import AgentSession, ChatMessage, SearchFilters
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.store.helpers import new_session

# Characters a careless round trip mangles: escapes, quotes, non-ASCII, a line separator.
AWKWARD = 'naïve café — 東京 "quoted" \\back\\slash\u2028 tab\tend'


async def test_a_server_summary_survives_the_store_byte_for_byte(store: Store) -> None:
    sid = await new_session(store)
    session = AgentSession(sid, "You are helpful.", "claude-sonnet-4-6", 200_000, key="telegram:1")
    for i in range(4):
        await store.append_message(sid, ChatMessage.user(f"question {i}: {AWKWARD}"))
        await store.append_message(sid, ChatMessage.assistant(f"answer {i}"))
    await store.append_message(sid, ChatMessage.user("the latest question"))
    settings = CompressionSettings(server_compaction="on_demand")
    llm = LLMSettings(max_retries=0)
    async with FakeAnthropic() as fake:
        provider = AnthropicProvider(api_key="t", base_url=fake.base_url, settings=llm)
        try:
            engine = CostOrderedCompressor(settings, provider, summary_model="claude-haiku-4-5")
            result = await compact(engine, store, session, trigger="manual")
            assert result.record is not None and result.record.strategy == "server_compaction"
            [issued] = [b for b in fake.context.issued.items()]
            view = await store.load_active(sid)
            block = view[0].content[0]
            assert view[0].kind == "summary" and block["type"] == "compaction"
            assert AWKWARD in block["content"]
            assert (block["signature"], block["content"]) == issued
            # The next chat request carries it exactly, and the API accepts it.
            loop = AgentLoop(provider, store, engine, llm=llm, tools=default_registry())
            await loop.run_turn(session, message=ChatMessage.user("go on"))
            sent = fake.message_requests[-1]["messages"][0]["content"][0]
            sent.pop("cache_control", None)
            assert json.dumps(sent, ensure_ascii=False) == json.dumps(block, ensure_ascii=False)
            assert fake.counts["errors"] == 0
        finally:
            await provider.aclose()
    hits = await store.search("question", SearchFilters(session_id=sid, state="archived"))
    assert len(hits) == 4 and all(h.compacted for h in hits)
    # The server's summary is searchable too, as ours are.
    summary_hits = await store.search("conversation", SearchFilters(session_id=sid, state="active"))
    assert [h.kind for h in summary_hits] == ["summary"]
