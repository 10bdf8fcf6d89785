"""A fake Anthropic Messages API on 127.0.0.1 that the real ``anthropic`` SDK talks to.

It validates every request with :func:`agent.transcript.validate_wire` (the same rules the
agent checks before a real call), knows each model's window and output cap like the real
API (an unknown model is a 404, ``max_tokens`` above the model's cap, a prompt over its
window and a prompt plus ``max_tokens`` over it are 400s, in the API's words), counts tokens
deterministically, accounts prompt caching by prefix, and answers with scripted replies, a
responder callable, or a default echo (``ack: ...``) / structured summary. ``context_window``
narrows every model's window (a small window makes a test compact early); ``windows`` sets
single models' windows (substring match, longest wins).

    async with FakeAnthropic(context_window=10_000) as fake:
        fake.script(tool_use_reply("memory", {"command": "view"}), text_reply("done"))
        fake.fail_next(529, "overloaded_error", "Overloaded")
        client = AsyncAnthropic(base_url=fake.base_url, api_key="test", max_retries=0)
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from agent.prompts import SUMMARIZER_SYSTEM
from agent.transcript import validate_wire
from agent.types import content_text
from tests.fakes.anthropic_cache import CacheUsage, PromptCache
from tests.fakes.anthropic_cache import count_tokens as _count_tokens
from tests.fakes.anthropic_context import (
    THRESHOLD_TRIGGER,
    Prepared,
    Refused,
    ServerContext,
    iteration,
    out_tokens,
    summary_of,
)
from tests.fakes.anthropic_diagnostics import Diagnostics, diagnostics_problem
from tests.fakes.anthropic_media import media_problems
from tests.fakes.anthropic_search import search_result_problems
from tests.fakes.anthropic_sse import Break, Pacing, generation_seconds, stream_response
from tests.fakes.anthropic_thinking import shown, sign, stripped_for_counting, thinking_problems
from tests.fakes.anthropic_tool_search import as_counted, tool_search_problems
from tests.fakes.anthropic_version import version_problems

# The nine sections agent/prompts.py asks the summarizer for (it adds "Archived" itself).
SUMMARY_HEADINGS: tuple[str, ...] = (
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "## Key Decisions",
    "## Resolved Questions",
    "## Pending Questions",
    "## Active Task",
    "## Remaining Work",
    "## Key Facts",
)
SUMMARY_MARKERS = ("<summary-request>", "<previous_summary>")
# The server-side fallback beta (refusals-and-fallback page, 2026-11): ``fallbacks`` needs it.
FALLBACK_BETA = "server-side-fallback-2026-07-01"
# The Messages API takes request bodies up to 32 MB (aiohttp's own default is 1 MB).
MAX_REQUEST_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """What the real API accepts for a model: its context window and its output cap (tokens)."""

    context_window: int
    max_output: int


# The published limits (written out here, not imported from agent.tokens: the fake must not
# share the table it checks). Substring match, longest key wins, as model ids carry dates.
# The current models (5.5) and the legacy Sonnet 5 / Opus 5 / Opus 4.6+ / Sonnet 4.6 have 1M
# windows natively; Sonnet 4.5 and older answer 200k (1M only with a beta header Hygieia does
# not send).
MODEL_LIMITS: dict[str, ModelLimits] = {
    "claude-fable-5-2": ModelLimits(1_000_000, 128_000),
    "claude-fable-5-1": ModelLimits(1_000_000, 128_000),
    "claude-fable-5": ModelLimits(1_000_000, 128_000),
    "claude-opus-5-5": ModelLimits(1_000_000, 128_000),
    "claude-sonnet-5-5": ModelLimits(1_000_000, 128_000),
    "claude-haiku-5-5": ModelLimits(1_000_000, 128_000),
    "claude-opus-5": ModelLimits(1_000_000, 128_000),
    "claude-sonnet-5": ModelLimits(1_000_000, 128_000),
    "claude-opus-4-8": ModelLimits(1_000_000, 128_000),
    "claude-opus-4-7": ModelLimits(1_000_000, 128_000),
    "claude-opus-4-6": ModelLimits(1_000_000, 128_000),
    "claude-opus-4-5": ModelLimits(200_000, 64_000),
    "claude-opus-4-1": ModelLimits(200_000, 32_000),
    "claude-opus-4": ModelLimits(200_000, 32_000),
    "claude-sonnet-4-6": ModelLimits(1_000_000, 128_000),
    "claude-sonnet-4-5": ModelLimits(200_000, 64_000),
    "claude-sonnet-4": ModelLimits(200_000, 64_000),
    "claude-haiku-4-5": ModelLimits(200_000, 64_000),
    "claude-3-7-sonnet": ModelLimits(200_000, 64_000),
    "claude-3-5-sonnet": ModelLimits(200_000, 8_192),
    "claude-3-5-haiku": ModelLimits(200_000, 8_192),
    "claude-3-opus": ModelLimits(200_000, 4_096),
    "claude-3-haiku": ModelLimits(200_000, 4_096),
}


def _longest(model: str, keys: Iterable[str]) -> str | None:
    # A key ends where a version number ends: "claude-fable-5-2" is not in "claude-fable-5-20260609".
    matches = [key for key in keys if re.search(re.escape(key) + r"(?!\d)", model)]
    return max(matches, key=len) if matches else None


SUMMARY_VERBS = ("summarize", "summarise")


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful answer: assistant content blocks and why the model stopped."""

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    output_tokens: int | None = None
    stop_details: dict[str, Any] | None = None
    """Why a refusal stopped (``{"type": "refusal", "category": ..., "explanation": ...}``)."""


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """An API error, sent as ``{"type": "error", "error": {...}}`` with ``status``."""

    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    error_code: str | None = None  # ``error.details.error_code`` (the compaction errors carry one)


Answer = Reply | ErrorReply
Responder = Callable[[dict[str, Any]], Answer | Awaitable[Answer]]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the fake received (``json`` is None when the body was not JSON)."""

    path: str
    json: dict[str, Any] | None
    headers: dict[str, str]


_tool_ids = itertools.count(1)


def text_reply(text: str, *, stop_reason: str = "end_turn", output_tokens: int | None = None) -> Reply:
    """A reply with one text block."""
    return Reply([{"type": "text", "text": text}], stop_reason, output_tokens)


def refusal_reply(text: str = "", *, category: str | None = "cyber") -> Reply:
    """A classifier refusal (a 200 answer): ``text`` is what the model wrote before it was cut
    off ("" refuses at the start), ``stop_details`` as the API sends it."""
    details: dict[str, Any] = {"type": "refusal", "category": category, "explanation": "declined"}
    return Reply([{"type": "text", "text": text}] if text else [], "refusal", stop_details=details)


def tool_use_reply(
    name: str, tool_input: dict[str, Any], *, tool_id: str | None = None, text: str | None = None
) -> Reply:
    """A reply that calls one tool (``stop_reason`` tool_use), optionally preceded by text."""
    block = {
        "type": "tool_use",
        "id": tool_id or f"toolu_{next(_tool_ids):024d}",
        "name": name,
        "input": tool_input,
    }
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return Reply([*content, block], "tool_use")


def error_reply(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> ErrorReply:
    """An API error; a 429 without a retry-after header gets ``retry-after: 1`` like the real API."""
    merged = dict(headers or {})
    if status == 429 and not any(k.lower().startswith("retry-after") for k in merged):
        merged["retry-after"] = "1"
    return ErrorReply(status, error_type, message, merged)


def summary_text(subject: str = "") -> str:
    """A plausible structured summary with the nine section headings."""
    about = subject.strip().replace("\n", " ")[:80] or "the conversation"
    sections = []
    for heading in SUMMARY_HEADINGS:
        body = f"- (fake) {about}"
        if heading == "## Progress":
            body = f"### Done\n{body}\n### In Progress\n- (none)\n### Blocked\n- (none)"
        sections.append(f"{heading}\n{body}")
    return "\n\n".join(sections)


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return ""


def last_user_text(body: dict[str, Any]) -> str:
    """The flattened text of the last user message of a request."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else content_text(content or [])
    return ""


def is_summary_request(body: dict[str, Any]) -> bool:
    """Whether this is a summarizer call: the compressor's own system prompt, an explicit
    summary marker, or a last user message that starts by asking for a summary.

    A chat system prompt that merely mentions summaries ("earlier parts may have been
    summarized") is not a summary request.
    """
    if _system_text(body).startswith(SUMMARIZER_SYSTEM[:60]):
        return True
    last = last_user_text(body).lower()
    return any(marker in last for marker in SUMMARY_MARKERS) or last.lstrip().startswith(SUMMARY_VERBS)


def default_responder(body: dict[str, Any]) -> Reply:
    """Echo the last user text, or answer a summary request with a structured summary."""
    if is_summary_request(body):
        text = last_user_text(body)
        inside = text.partition("<transcript>")[2].partition("</transcript>")[0]
        return text_reply(summary_text(inside or text))
    return text_reply(f"ack: {last_user_text(body)[:50]}")


def _problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["request body must be a JSON object"]
    problems = [f"{name}: Field required" for name in ("model", "max_tokens", "messages") if name not in body]
    if problems:
        return problems
    if not isinstance(body["model"], str) or not body["model"]:
        problems.append("model: must be a non-empty string")
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        problems.append("max_tokens: must be a positive integer")
    temperature = body.get("temperature")
    if temperature is not None and not (isinstance(temperature, int | float) and 0 <= temperature <= 1):
        problems.append("temperature: must be between 0 and 1")
    for index, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or not tool.get("name"):
            problems.append(f"tools.{index}.name: Field required")
    if not isinstance(body["messages"], list):
        return [*problems, "messages: must be a list"]
    wire = validate_wire(body["messages"], body.get("system"), body.get("tools"))
    searched = search_result_problems(str(body["model"]), body["messages"])
    deferred = tool_search_problems(body)
    diagnosed = diagnostics_problem(body)
    problems += [diagnosed] if diagnosed else []
    return problems + wire + media_problems(body["messages"]) + searched + deferred + version_problems(body)


def request_problems(body: Any) -> list[str]:
    """Why this server (and the real API at version 2026-10-21) would answer a request body 400."""
    return _problems(body) or thinking_problems(body)


class FakeAnthropic:
    """The fake server; see the module docstring. Use as an async context manager."""

    def __init__(
        self,
        *,
        context_window: int | None = None,
        windows: dict[str, int] | None = None,
        min_cacheable_tokens: int = 0,
        clock: Callable[[], float] | None = None,
        responder: Responder | None = None,
        api_key: str | None = None,
        count_tokens_enabled: bool = True,
        port: int = 0,
    ) -> None:
        self.context_window = context_window
        self.windows = dict(windows or {})
        self.responder = responder
        self.api_key = api_key  # when set, other keys get 401 authentication_error
        self.count_tokens_enabled = count_tokens_enabled  # False: count_tokens answers 404
        self.delay = 0.0  # seconds to wait before answering any request
        # Seconds a model takes before it answers (substring match, longest wins): a slow
        # summary model, say ({"claude-haiku-4-5": 6.0}).
        self.model_delays: dict[str, float] = {}
        self.cache = PromptCache(min_cacheable_tokens, clock)
        self.requests: list[RecordedRequest] = []
        self.counts: Counter[str] = Counter()
        self.usages: list[dict[str, int]] = []
        self._script: deque[Answer] = deque()
        self._failures: dict[str, deque[ErrorReply]] = {"messages": deque(), "count_tokens": deque()}
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._listen_port = port  # 0: any free port
        self.pacing = Pacing()  # how streamed answers ("stream": true) are paced
        self._breaks: deque[Break] = deque()
        # Context editing and compaction (tests/fakes/anthropic_context.py); the stop reasons
        # the next on-demand compactions end with instead of a summary ("max_tokens", ...).
        self.context = ServerContext()
        self.compaction_failures: deque[str] = deque()
        # The model a refused request is answered on when it asks for server-side fallback.
        self.fallback_model = "claude-opus-4-8"
        # Cache diagnostics: the fingerprints kept per response id (tests/fakes/anthropic_diagnostics.py).
        self.diagnostics = Diagnostics()

    # lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._listen_port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeAnthropic:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("FakeAnthropic is not started")
        return f"http://127.0.0.1:{self._port}"

    # scripting -------------------------------------------------------------------------------
    @property
    def min_cacheable_tokens(self) -> int:
        return self.cache.min_cacheable_tokens

    @min_cacheable_tokens.setter
    def min_cacheable_tokens(self, value: int) -> None:
        self.cache.min_cacheable_tokens = value

    def script(self, *answers: Answer) -> None:
        """Queue replies (or errors) for the next /v1/messages requests, in order."""
        self._script.extend(answers)

    def fail_next(
        self,
        status: int,
        error_type: str,
        message: str,
        headers: dict[str, str] | None = None,
        times: int = 1,
        *,
        endpoint: str = "messages",
    ) -> None:
        """Answer the next ``times`` requests to ``endpoint`` ("messages" or "count_tokens") with an error."""
        self._failures[endpoint].extend([error_reply(status, error_type, message, headers)] * times)

    def break_next_stream(self, after_deltas: int, how: str = "error") -> None:
        """Make the next streamed answer fail after ``after_deltas`` deltas ("error" event or "drop")."""
        self._breaks.append(Break(after_deltas, "drop" if how == "drop" else "error"))

    def limits(self, model: str) -> ModelLimits | None:
        """The model's limits as this server enforces them; None for a model the API does not know."""
        key = _longest(model, MODEL_LIMITS)
        if key is None:
            return None
        published = MODEL_LIMITS[key]
        window = published.context_window
        if self.context_window is not None:
            window = min(window, self.context_window)
        named = _longest(model, self.windows)
        if named is not None:
            window = self.windows[named]
        return ModelLimits(window, published.max_output)

    def count_tokens(self, body: dict[str, Any]) -> int:
        """The deterministic token count the fake uses for windows, usage and count_tokens
        (earlier turns' thinking blocks and deferred tool definitions left out, as the API does)."""
        return _count_tokens(stripped_for_counting(as_counted(body)))

    @property
    def message_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of every /v1/messages request so far."""
        return [r.json for r in self.requests if r.path == "/v1/messages" and r.json is not None]

    @property
    def last_usage(self) -> dict[str, int] | None:
        return self.usages[-1] if self.usages else None

    # handlers --------------------------------------------------------------------------------
    async def _receive(self, request: web.Request, endpoint: str) -> tuple[Any, web.Response | None]:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        recorded = body if isinstance(body, dict) else None
        self.requests.append(
            RecordedRequest(request.path, recorded, {k.lower(): v for k, v in request.headers.items()})
        )
        self.counts[endpoint] += 1
        if self.delay > 0:
            await asyncio.sleep(self.delay)
        if self._failures[endpoint]:
            return body, self._error(self._failures[endpoint].popleft())
        if self.api_key is not None and self.api_key not in (
            request.headers.get("x-api-key"),
            request.headers.get("authorization", "").removeprefix("Bearer "),
        ):
            return body, self._error(ErrorReply(401, "authentication_error", "invalid x-api-key"))
        if "anthropic-version" not in request.headers:
            return body, self._error(
                ErrorReply(400, "invalid_request_error", "anthropic-version: header is required")
            )
        return body, None

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body, failed = await self._receive(request, "messages")
        if failed is not None:
            return failed
        problems = request_problems(body)
        if problems:
            return self._error(ErrorReply(400, "invalid_request_error", problems[0]))
        headers = {k.lower(): v for k, v in request.headers.items()}
        fallback = "fallbacks" in body
        if fallback and FALLBACK_BETA not in [
            b.strip() for b in headers.get("anthropic-beta", "").split(",")
        ]:
            # Without its beta header the field is unknown, as any other would be.
            return self._error(
                ErrorReply(400, "invalid_request_error", "fallbacks: Extra inputs are not permitted")
            )
        try:
            prepared = self.context.prepare(body, headers, self.count_tokens)
        except Refused as exc:
            return self._error(
                ErrorReply(400, "invalid_request_error", exc.message, error_code=exc.error_code)
            )
        # The window applies to the prompt the model sees: after the edits, from the last block on.
        refused = self._over_limits({**body, "messages": prepared.body["messages"]})
        if refused is not None:
            return self._error(refused)
        slow = _longest(str(body["model"]), self.model_delays)
        if slow is not None:
            await asyncio.sleep(self.model_delays[slow])
        if prepared.on_demand is not None:
            message = self._compaction_json(body, prepared)
        else:
            answer = await self._answer(body)
            model = str(body["model"])
            if fallback and isinstance(answer, Reply) and answer.stop_reason == "refusal":
                # The API asks the fallback model instead: its answer, its model, its usage.
                answer, model = await self._answer(body), self.fallback_model
            if isinstance(answer, ErrorReply):
                return self._error(answer)
            message = self._message_json({**body, "model": model}, answer, prepared)
        if "diagnostics" in body:
            message["diagnostics"] = self.diagnostics.answer(body, str(message["id"]))
        if body.get("stream") is True:
            broken = self._breaks.popleft() if self._breaks else None
            return await stream_response(request, message, self.pacing, broken)
        await asyncio.sleep(generation_seconds(message, self.pacing))
        return web.json_response(message)

    def _over_limits(self, body: dict[str, Any], *, output: bool = True) -> ErrorReply | None:
        """The real API's answer to an unknown model, a max_tokens over the model's output cap,
        or a prompt over its window; None when the request is within them."""
        model = str(body["model"])
        limits = self.limits(model)
        if limits is None:
            return ErrorReply(404, "not_found_error", f"model: {model}")
        if output and body["max_tokens"] > limits.max_output:
            return ErrorReply(
                400,
                "invalid_request_error",
                f"max_tokens: {body['max_tokens']} > {limits.max_output}, which is the maximum allowed "
                f"number of output tokens for {model}",
            )
        tokens = self.count_tokens(body)
        if tokens > limits.context_window:
            message = f"prompt is too long: {tokens} tokens > {limits.context_window} maximum"
            return ErrorReply(400, "invalid_request_error", message)
        if output and tokens + body["max_tokens"] > limits.context_window:
            # The window holds the reply too: the API refuses a request whose input and
            # max_tokens together do not fit (it does not shorten max_tokens itself).
            message = (
                f"input length and `max_tokens` exceed context limit: {tokens} + {body['max_tokens']} > "
                f"{limits.context_window}, decrease input length or `max_tokens` and try again"
            )
            return ErrorReply(400, "invalid_request_error", message)
        return None

    async def _count(self, request: web.Request) -> web.Response:
        if not self.count_tokens_enabled:
            return self._error(ErrorReply(404, "not_found_error", "Not found"))
        body, failed = await self._receive(request, "count_tokens")
        if failed is not None:
            return failed
        problems = _problems({"max_tokens": 1, **body} if isinstance(body, dict) else body)
        if problems:
            return self._error(ErrorReply(400, "invalid_request_error", problems[0]))
        refused = self._over_limits({"max_tokens": 1, **body}, output=False)
        if refused is not None and refused.status == 404:
            return self._error(refused)
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            # Existing blocks and context edits apply; no compaction is triggered here.
            prepared = self.context.prepare(
                {k: v for k, v in body.items() if k != "compaction"}, headers, self.count_tokens
            )
        except Refused as exc:
            return self._error(
                ErrorReply(400, "invalid_request_error", exc.message, error_code=exc.error_code)
            )
        answer: dict[str, Any] = {"input_tokens": self.count_tokens(prepared.body)}
        if "context_management" in body:
            answer["context_management"] = {"original_input_tokens": self.count_tokens(body)}
        return web.json_response(answer)

    async def _answer(self, body: dict[str, Any]) -> Answer:
        if self._script:
            return self._script.popleft()
        if self.responder is None:
            return default_responder(body)
        answer = self.responder(body)
        if inspect.isawaitable(answer):
            return await answer
        return answer

    def _message_json(self, body: dict[str, Any], reply: Reply, prepared: Prepared) -> dict[str, Any]:
        content, stop_reason = list(reply.content), reply.stop_reason
        iterations: list[dict[str, Any]] = []
        seen = prepared.body
        threshold = prepared.threshold
        if threshold is not None:
            trigger = (threshold.get("trigger") or {"value": THRESHOLD_TRIGGER})["value"]
            tokens = self.count_tokens(seen)
            if tokens >= trigger:
                # Summarize the prompt as it stands, then answer from the summary alone.
                block = self.context.threshold_block(summary_of(seen))
                iterations.append(iteration("compaction", CacheUsage(tokens, 0, 0), out_tokens(block)))
                seen = {**seen, "messages": [{"role": "assistant", "content": [block]}]}
                if threshold.get("pause_after_compaction"):
                    content, stop_reason = [block], "compaction"
                else:
                    content = [block, *content]
        cached = self.cache.account(stripped_for_counting(as_counted(seen)))
        output = reply.output_tokens if reply.output_tokens is not None else out_tokens(reply.content)
        hour = cached.cache_creation_1h_input_tokens
        usage: dict[str, Any] = {
            "input_tokens": cached.input_tokens,
            "output_tokens": output,
            "cache_creation_input_tokens": cached.cache_creation_input_tokens,
            "cache_read_input_tokens": cached.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": cached.cache_creation_input_tokens - hour,
                "ephemeral_1h_input_tokens": hour,
            },
        }
        if stop_reason == "compaction":
            usage = {k: 0 for k in usage}
            usage["cache_creation"] = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
        else:
            iterations.append(iteration("message", cached, output))
        self.usages.append(dict(usage))
        if prepared.iterations:
            usage["iterations"] = iterations
        message = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [sign(block, str(body["model"]), show=shown(body)) for block in content],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if reply.stop_details is not None:
            message["stop_details"] = reply.stop_details
        if "context_management" in body:
            message["context_management"] = {"applied_edits": prepared.applied_edits}
        return message

    def _compaction_json(self, body: dict[str, Any], prepared: Prepared) -> dict[str, Any]:
        """The answer to an on-demand compaction: the signed block alone, its call in iterations."""
        failure = self.compaction_failures.popleft() if self.compaction_failures else None
        message = self.context.on_demand_message(body, prepared, self.count_tokens(prepared.body), failure)
        self.usages.append({k: v for k, v in message["usage"].items() if k != "iterations"})
        return message

    def _error(self, error: ErrorReply) -> web.Response:
        self.counts["errors"] += 1
        detail: dict[str, Any] = {"type": error.error_type, "message": error.message}
        if error.error_code is not None:
            detail["details"] = {"error_code": error.error_code}
        payload = {"type": "error", "error": detail}
        headers = {"request-id": f"req_{uuid.uuid4().hex[:24]}", **error.headers}
        return web.json_response(payload, status=error.status, headers=headers)
