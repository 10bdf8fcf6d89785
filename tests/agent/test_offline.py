"""The offline provider: says it is offline, acknowledges, summarizes extractively."""

from __future__ import annotations

from agent.engines.compressor.engine import ContextCompressor
from agent.loop import AgentLoop
from agent.offline import OfflineProvider
from agent.prompts import SECTIONS, serialize_messages, summary_instructions
from agent.provider import LLMRequest
from agent.settings import CompressionSettings, LLMSettings, PromptCachingSettings
from agent.tools import default_registry
from agent.types import ChatMessage, text_block
from tests.agent.loop_support import SUMMARY_MODEL, exchanges, make_session
from tests.fakes.memory_store import InMemoryStore


async def test_chat_reply_says_offline_and_acknowledges_latest_message() -> None:
    request = LLMRequest(
        model="claude-sonnet-4-5",
        messages=[
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": [text_block("ok")]},
            {"role": "user", "content": [text_block("what is the weather in Oslo?")]},
        ],
        max_tokens=100,
    )
    response = await OfflineProvider().create(request)
    text = response.content[0]["text"]
    assert text.startswith("[offline]") and "No API key" in text and "weather in Oslo" in text
    assert response.estimated_usage and response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.stop_reason == "end_turn"


async def test_summary_request_returns_extractive_summary_of_the_transcript() -> None:
    transcript = serialize_messages(
        [
            ChatMessage.user("Deploy the bot to https://example.org/bot please", id=4),
            ChatMessage.assistant("We decided to use port 8443.", id=5),
            ChatMessage.user("Is TLS on?", id=6),
        ]
    )
    prompt = summary_instructions(transcript, budget_tokens=500)
    request = LLMRequest(
        model="claude-haiku-4-5",
        messages=[{"role": "user", "content": [text_block(prompt)]}],
        max_tokens=800,
        purpose="summary",
    )
    text = (await OfflineProvider().create(request)).content[0]["text"]
    for name in SECTIONS:
        assert f"## {name}\n" in text
    assert "https://example.org/bot" in text and "port 8443" in text and "Is TLS on?" in text


async def test_offline_is_deterministic_and_cannot_count() -> None:
    provider = OfflineProvider()
    request = LLMRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=10)
    assert await provider.create(request) == await provider.create(request)
    assert await provider.count_tokens(request) is None
    assert provider.name == "offline"


async def test_the_echo_quotes_the_words_not_the_gateways_author_header() -> None:
    request = LLMRequest(
        model="m",
        max_tokens=100,
        messages=[{"role": "user", "content": [{"type": "text", "text": "[Ann, 14:02 UTC] hello there"}]}],
    )
    response = await OfflineProvider().create(request)
    assert response.content[0]["text"].endswith("“hello there”")


async def test_offline_calls_cost_nothing() -> None:
    request = LLMRequest(model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
    response = await OfflineProvider().create(request)
    assert response.estimated_usage and not response.billed


async def test_offline_usage_does_not_move_the_calibration_scale() -> None:
    # The offline usage is an estimate that leaves out the tool definitions: learned from, it
    # would shrink every later estimate (/context's parts drifted from the first turn on).
    provider = OfflineProvider()
    store = InMemoryStore()
    engine = ContextCompressor(CompressionSettings(), provider, summary_model=SUMMARY_MODEL)
    loop = AgentLoop(
        provider, store, engine, llm=LLMSettings(), caching=PromptCachingSettings(), tools=default_registry()
    )
    session = make_session()
    for message in exchanges(10, chars=2000):  # the messages outweigh the prompt's fixed part
        await store.append_message(session.id, message)

    for text in ("one", "two", "three"):
        await loop.run_turn(session, message=ChatMessage.user(text))

    state = await store.load_context_state(session.id)
    assert state.token_scale is None
    assert state.last_prompt_tokens is None  # no count of the API's to show in /context either
