"""Server-side clearing: the clear_tool_uses edit on the request, our stored history whole."""

from __future__ import annotations

from agent.engines.strategies.server_clearing import ServerClearing
from agent.llm import AnthropicProvider
from agent.provider import LLMRequest
from agent.server_context import STRATEGIES_KEY
from agent.settings import CompressionSettings, LLMSettings
from agent.types import StrategyRun
from tests.agent.engines.strategies.support import MODEL, rig, session_for, tool_history
from tests.fakes.anthropic import FakeAnthropic, text_reply

BETA = "context-management-2025-06-27"


def clearing(**overrides: object) -> CompressionSettings:
    values: dict[str, object] = {
        "server_clear_tool_uses": True,
        "server_clear_at": 0.02,  # 4k tokens of the 200k window
        "server_clear_keep": 2,
        "server_clear_at_least_tokens": 2000,
        **overrides,
    }
    return CompressionSettings.model_validate(values)


async def test_no_edit_and_no_beta_unless_configured() -> None:
    async with rig() as r:
        await r.preload(tool_history(6))
        await r.turn("and now?")
        [chat] = r.chat_requests()
        assert chat.json is not None and "context_management" not in chat.json
        assert "anthropic-beta" not in chat.headers


async def test_the_configured_edit_is_sent_with_its_beta_header() -> None:
    settings = clearing(server_clear_exclude_tools=["recall"], server_clear_tool_inputs=True)
    async with rig(settings) as r:
        await r.turn("hello")
        [chat] = r.chat_requests()
        assert chat.json is not None
        assert chat.json["context_management"] == {
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": 4000},
                    "keep": {"type": "tool_uses", "value": 2},
                    "clear_at_least": {"type": "input_tokens", "value": 2000},
                    "clear_tool_inputs": True,
                    "exclude_tools": ["recall"],
                }
            ]
        }
        assert BETA in chat.headers["anthropic-beta"].split(",")


async def test_stored_history_stays_whole_and_applied_edits_are_recorded() -> None:
    async with rig(clearing()) as r:
        before = await r.preload(tool_history(6))
        await r.turn("and now?")
        stored = await r.active()
        # Every tool result is stored verbatim: the API edited only what it was sent.
        assert [m.content for m in stored[: len(before)]] == [m.content for m in before]
        record = r.fake.message_requests[-1]
        assert "context_management" in record
        state = await r.store.load_context_state(r.session.id)
        entry = state.extra[STRATEGIES_KEY]["server_clearing"]
        assert entry["runs"] == 1
        assert entry["last_cleared_tool_uses"] == 4  # six rounds, the newest two kept
        assert entry["tokens_freed"] > 3500  # four results of about 1000 tokens
        assert state.extra["last_strategy"] == "server_clearing"
        # ... and kept as a strategy run by the store, so /metrics and /context count it.
        assert r.store.strategy_runs == [("s1", StrategyRun("server_clearing", entry["tokens_freed"]))]


async def test_the_api_sees_fewer_tokens_than_we_stored() -> None:
    async with rig(clearing()) as r:
        await r.preload(tool_history(6))
        result = await r.turn("and now?")
        whole = r.fake.count_tokens(r.fake.message_requests[-1])
        assert result.usages[-1].context_tokens < whole - 3500


async def test_calibration_learns_from_the_whole_prompt_not_the_cleared_one() -> None:
    async with rig(clearing()) as on, rig() as off:
        for r in (on, off):
            await r.preload(tool_history(6))
            await r.turn("and now?")
        cleared = await on.store.load_context_state(on.session.id)
        plain = await off.store.load_context_state(off.session.id)
        assert cleared.token_scale == plain.token_scale
        assert cleared.last_prompt_tokens == plain.last_prompt_tokens


async def test_clearing_that_frees_enough_spares_our_summary() -> None:
    # 60k-token window, our threshold at 50% (30k): the history is over it, but most of it is
    # old tool output the API will clear; the cheaper strategy serves and we compact nothing.
    session = session_for(context_window=60_000)
    settings = clearing(server_clear_at=0.2, threshold=0.5)
    async with rig(settings, session=session) as r:
        await r.preload(tool_history(12, chars=12_000))
        result = await r.turn("and now?")
        assert result.compactions == []
        assert r.script.summary_bodies == []
        assert (await r.store.list_compactions(r.session.id)) == []
    async with rig(CompressionSettings(threshold=0.5), session=session) as r:
        await r.preload(tool_history(12, chars=12_000))
        result = await r.turn("and now?")
        assert len(result.compactions) == 1


async def test_a_streamed_call_reports_the_applied_edits() -> None:
    async with FakeAnthropic() as fake:
        provider = AnthropicProvider(api_key="t", base_url=fake.base_url, settings=LLMSettings(max_retries=0))
        try:
            session = session_for()
            strategy = ServerClearing(at=0.01, keep=1, clear_at_least=100)
            messages = [m.to_wire() for m in tool_history(4)] + [{"role": "user", "content": "next?"}]
            tools = [{"name": "memory", "description": "notes", "input_schema": {"type": "object"}}]
            request = strategy.shape(
                session, LLMRequest(model=MODEL, messages=messages, max_tokens=64, tools=tools)
            )
            fake.script(text_reply("ok"))
            pieces: list[str] = []
            response = await provider.stream(request, pieces.append)
            assert "".join(pieces) == "ok"
            [edit] = response.applied_edits
            assert edit.cleared_tool_uses == 3 and edit.cleared_input_tokens > 1000
        finally:
            await provider.aclose()
