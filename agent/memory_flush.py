"""Notes saved before compaction: one silent turn in which the agent updates its memory notes.

Registered as a ``pre_compact`` hook, it runs wherever a summary is about to archive a range — on
every trigger (hygiene, in-loop, reactive, manual, the overnight sweep), since all of them go through
:func:`agent.compaction.compact` and the engine's summary step. The model is shown the range and
the notes it already has, and may call the memory tool only to append or edit: ``create`` (a new
file; an existing one is refused by the tool itself), ``str_replace``, ``insert`` and ``view``;
``delete`` and ``rename`` are refused, so no note is ever replaced wholesale or lost. Nothing is sent
to the chat. What it wrote is handed to the summary as text to keep. A flush that fails is logged and
skipped: the compaction goes on. Registered through :meth:`MemoryFlush.as_hook`, it runs under
``compression.memory_flush_timeout_seconds`` (the hooks' own bound, :mod:`agent.bounded`), not
``hooks.timeout_seconds``.
"""

from __future__ import annotations

import logging
from typing import Any

from agent.engines.hooks import Hook, PreCompact
from agent.errors import LLMError, StoreError
from agent.prompts import serialize_messages
from agent.provider import LLMProvider, LLMRequest
from agent.settings import CompressionSettings
from agent.storage import ConversationStore
from agent.tokens import cost_usd
from agent.tools.base import ToolContext, ToolOutput
from agent.tools.memory import MemoryTool
from agent.tools.output import tool_result_block
from agent.tools.schema import validate_input
from agent.types import ContentBlock, UsageRecord, text_block

_log = logging.getLogger(__name__)

MAX_ROUNDS = 4
FLUSH_OVERHEAD_TOKENS = 1500  # system prompt, memory tool definition, notes listing, framing
MIN_FLUSH_INPUT_TOKENS = 500
FLUSH_SYSTEM = (
    "Part of this conversation is about to be archived and replaced by a summary. Before that happens, "
    "save what is worth keeping for the long run into your memory notes under /memories with the memory "
    "tool: facts about the people, their preferences, decisions taken, commitments and open tasks. Add to "
    "existing notes with str_replace or insert, or create a new file; never rewrite or delete a note. "
    "Keep notes short. When nothing is worth saving, make no call. Nothing you write here is shown to anyone."
)
REFUSED = frozenset({"delete", "rename"})


class MemoryFlush:
    """The pre_compact hook; see the module docstring. Returns text the summary must keep, or None."""

    def __init__(
        self,
        provider: LLMProvider,
        store: ConversationStore,
        settings: CompressionSettings,
        *,
        prices: dict[str, tuple[float, float]] | None = None,
    ) -> None:
        self._provider = provider
        self._store = store
        self._settings = settings
        self._prices = prices
        self._tool = MemoryTool()

    async def __call__(self, event: PreCompact) -> str | None:
        if not self._settings.memory_flush or not event.messages:
            return None
        fields = {"session": event.session.id, "trigger": event.trigger}
        try:
            written = await self._flush(event)
        except (LLMError, StoreError) as exc:
            _log.warning("memory flush failed: %s; compacting without it", exc, extra=fields)
            return None
        _log.info("memory flush: %d note(s) written", len(written), extra=fields)
        return self._kept(written) if written else None

    def as_hook(self) -> Hook:
        """This flush as a pre_compact hook with its own time limit."""
        return Hook(self, "memory flush", self._settings.memory_flush_timeout_seconds)

    async def _flush(self, event: PreCompact) -> list[str]:
        session = event.session
        scope = session.key or session.id
        ctx = ToolContext(session, self._store, scope)
        notes = await self._store.memory_list(scope)
        listing = "\n".join(f"- {n.path}" for n in notes) or "(none yet)"
        # The range is shown within what the session's window leaves beside the reply and the
        # tool definition (a reactive flush runs exactly when the context is too big).
        spare = session.context_window - self._settings.memory_flush_max_tokens - FLUSH_OVERHEAD_TOKENS
        room = max(MIN_FLUSH_INPUT_TOKENS, min(self._settings.memory_flush_input_tokens, spare // 2))
        transcript = serialize_messages(list(event.messages), max_tokens=room)
        messages: list[dict[str, Any]] = [
            {
                "role": "user",
                "content": [
                    text_block(
                        f"Your notes now:\n{listing}\n\nThe part about to be archived:\n"
                        f"<transcript>\n{transcript}\n</transcript>"
                    )
                ],
            }
        ]
        written: list[str] = []
        for _ in range(MAX_ROUNDS):
            request = LLMRequest(
                model=session.model,
                messages=messages,
                max_tokens=self._settings.memory_flush_max_tokens,
                system=[text_block(FLUSH_SYSTEM)],
                tools=[self._tool.definition()],
                purpose="summary",
            )
            response = await self._provider.create(request)
            await self._record(session.id, response.model or session.model, response)
            uses = [b for b in response.content if b.get("type") == "tool_use"]
            if not uses:
                break
            results = [await self._run(ctx, use, written) for use in uses]
            messages += [
                {"role": "assistant", "content": response.content},
                {"role": "user", "content": results},
            ]
        return written

    async def _run(self, ctx: ToolContext, use: ContentBlock, written: list[str]) -> ContentBlock:
        tool_input = use.get("input") or {}
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if use.get("name") != self._tool.name:
            output = ToolOutput.error("only the memory tool is available here")
        elif command in REFUSED:
            output = ToolOutput.error(
                f"{command} is not allowed now: add to notes or edit them, never remove"
            )
        elif problems := validate_input(self._tool.input_schema, tool_input):
            output = ToolOutput.error("invalid input for memory: " + "; ".join(problems))
        else:
            try:
                output = await self._tool.run(ctx, dict(tool_input))
            except Exception as exc:  # a refused command (ToolError) or a bad path: the model reads it
                output = ToolOutput.error(str(exc))
            if not output.is_error and command != "view":
                written.append(str(tool_input.get("path")))
        return tool_result_block(str(use.get("id")), output)

    async def _record(self, session_id: str, model: str, response: Any) -> None:
        cost = cost_usd(model, response.usage, prices=self._prices) if response.billed else 0.0
        record = UsageRecord(model=model, purpose="summary", usage=response.usage, cost_usd=cost)
        await self._store.record_usage(session_id, record)

    def _kept(self, paths: list[str]) -> str:
        unique = list(dict.fromkeys(paths))
        return "Durable notes saved just before this compaction (memory tool): " + ", ".join(unique)
