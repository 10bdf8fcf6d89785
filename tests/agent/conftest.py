"""Fixtures and builders for the compressor tests: a scripted summarizer provider, a fake
clock, transcript builders and a Hypothesis strategy for transcripts with nested tool rounds."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import strategies as st

from agent.engines.compressor.engine import ContextCompressor
from agent.errors import LLMError
from agent.prompts import SECTIONS
from agent.provider import LLMRequest, LLMResponse
from agent.settings import CompressionSettings
from agent.types import AgentSession, ChatMessage, ContentBlock, Usage, text_block
from tests.fakes.memory_store import InMemoryStore

CANNED_SUMMARY = "\n".join(f"## {name}\n- canned {name.lower()}" for name in SECTIONS if name != "Archived")


@dataclass(frozen=True)
class Cut:
    """A scripted summary the model could not finish: it stops at max_tokens."""

    text: str


class ScriptedSummarizer:
    """An LLMProvider for unit tests: answers with canned text, cut-off text, or scripted errors."""

    name = "scripted"

    def __init__(self, *replies: str | Cut | LLMError) -> None:
        self.replies: list[str | Cut | LLMError] = list(replies)
        self.requests: list[LLMRequest] = []

    async def create(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else CANNED_SUMMARY
        if isinstance(reply, LLMError):
            raise reply
        cut = isinstance(reply, Cut)
        return LLMResponse(
            content=[text_block(reply.text if isinstance(reply, Cut) else reply)],
            stop_reason="max_tokens" if cut else "end_turn",
            usage=Usage(input_tokens=1000, output_tokens=request.max_tokens if cut else 200),
            model=request.model,
        )

    async def count_tokens(self, request: LLMRequest) -> int | None:
        return None

    async def aclose(self) -> None:
        return None

    def prompt(self, index: int = -1) -> str:
        """The user-turn text of a recorded request."""
        return "".join(b["text"] for b in self.requests[index].messages[-1]["content"])


class FakeClock:
    """A settable UTC clock."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# ---- builders ------------------------------------------------------------------------------

_ids = itertools.count(1)


def user(text: str) -> ChatMessage:
    return ChatMessage.user(text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage.assistant(text)


def tool_round(
    outputs: Sequence[str], *, name: str = "bash", split_results: bool = False
) -> list[ChatMessage]:
    """An assistant message with one tool_use per output, then the results (one message or one each)."""
    ids = [f"toolu_{next(_ids):06d}" for _ in outputs]
    uses: list[ContentBlock] = [
        {"type": "tool_use", "id": i, "name": name, "input": {"cmd": f"run {i}"}} for i in ids
    ]
    results: list[ContentBlock] = [
        {"type": "tool_result", "tool_use_id": i, "content": out} for i, out in zip(ids, outputs, strict=True)
    ]
    head = ChatMessage(role="assistant", content=[text_block("Let me check."), *uses])
    if split_results:
        return [head, *(ChatMessage(role="user", content=[r]) for r in results)]
    return [head, ChatMessage(role="user", content=results)]


def conversation(turns: int, *, output_chars: int = 2000, words: int = 60) -> list[ChatMessage]:
    """``turns`` exchanges, each a question, a tool round with a long output, and an answer."""
    out: list[ChatMessage] = []
    for t in range(turns):
        out.append(user(f"Question {t}: " + f"please look at file /srv/app/mod{t}.py " * (words // 8)))
        out.extend(tool_round([f"line {t}\n" + "x" * output_chars + "\nexit code 0"]))
        out.append(assistant(f"Answer {t}: " + "the result is fine " * (words // 4)))
    return out


async def persist(
    store: InMemoryStore, session_id: str, messages: Sequence[ChatMessage]
) -> list[ChatMessage]:
    return [await store.append_message(session_id, m) for m in messages]


def latest_human(messages: Sequence[ChatMessage]) -> ChatMessage | None:
    for m in reversed(messages):
        if m.role == "user" and m.kind == "message" and not m.tool_result_ids():
            return m
    return None


# ---- hypothesis ----------------------------------------------------------------------------

_TEXT = st.text(alphabet="abcdefghij klmnop.?/0123456789漢字", min_size=1, max_size=80).filter(str.strip)
_OUTPUT = st.one_of(
    st.text(alphabet="abc \n", min_size=1, max_size=60),
    st.integers(200, 4000).map(lambda n: "out " + "y" * n),
    st.just("identical output " * 20),
)


@st.composite
def transcripts(draw: st.DrawFn, max_turns: int = 12) -> list[ChatMessage]:
    """Valid transcripts: user turns, 0-3 tool rounds each (1-3 calls per round, results in one
    message or split), long and identical outputs, maybe a long first message (a pasted brief
    that no tail budget holds), maybe ending mid tool round."""
    out: list[ChatMessage] = []
    turns = draw(st.integers(1, max_turns))
    long_first = draw(st.one_of(st.just(0), st.integers(2_000, 12_000)))
    for turn in range(turns):
        text = draw(_TEXT)
        out.append(user(f"{text} {'brief ' * (long_first // 6)}" if turn == 0 and long_first else text))
        for _ in range(draw(st.integers(0, 3))):
            outputs = draw(st.lists(_OUTPUT, min_size=1, max_size=3))
            out.extend(tool_round(outputs, split_results=draw(st.booleans())))
        in_progress = turn == turns - 1 and out[-1].tool_result_ids() and draw(st.booleans())
        if not in_progress:
            out.append(assistant(draw(_TEXT)))
    return out


# ---- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings() -> CompressionSettings:
    return CompressionSettings(protect_last_n=4)


@pytest.fixture
def session() -> AgentSession:
    return AgentSession(
        id="s1", system_prompt="You are a test.", model="claude-sonnet-4-5", context_window=20_000
    )


@pytest.fixture
def store(session: AgentSession) -> InMemoryStore:
    memory = InMemoryStore()
    memory.add_session(session.id, platform="console", chat_id="c1")
    return memory


@pytest.fixture
def summarizer() -> ScriptedSummarizer:
    return ScriptedSummarizer()


@pytest.fixture
def engine(
    settings: CompressionSettings, summarizer: ScriptedSummarizer, clock: FakeClock
) -> ContextCompressor:
    return ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)


def wire(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    return [m.to_wire() for m in messages]
