"""Typed settings the agent takes; the gateway's configuration embeds these models."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_SUMMARY_MODEL = "claude-haiku-5-5"
DEFAULT_BUDGET_TOKENS = 200_000
MAX_TOKEN_COUNT = 100_000_000
"""The most a token count in the settings may say (no model's window comes near; a budget or
window beyond it is a typo, and one past 2**31 would not fit the columns it is stored in)."""
# The server-side strategies are listed but off until their own switch is on
# (server_clear_tool_uses, server_compaction): each returns no strategy then.
DEFAULT_STRATEGIES = ("snip", "server_clearing", "prune", "server_compaction", "summary", "reactive")


class ContextSettings(BaseModel):
    """Keys under ``context:``: which engine manages the context, and how it is guarded."""

    model_config = ConfigDict(extra="forbid")

    engine: str = "compressor"
    timeout_seconds: float = Field(300.0, gt=0.0)
    """An engine's compaction step that takes longer is abandoned; the built-in serves the call."""
    breaker_fallback: Literal["extractive", "sliding"] = "extractive"
    """What stands in for the summary while the summary model's breaker is open."""


class HooksSettings(BaseModel):
    """Keys under ``hooks:``: ``"package.module:function"`` (or a list of them) per kind."""

    model_config = ConfigDict(extra="forbid")

    pre_compact: list[str] = Field(default_factory=list)
    post_compact: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(10.0, gt=0)
    """A hook still running after this long is abandoned (logged, skipped); the notes flush has its own."""

    @field_validator("pre_compact", "post_compact", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    def as_config(self) -> dict[str, list[str]]:
        return {"pre_compact": list(self.pre_compact), "post_compact": list(self.post_compact)}


class CompressionSettings(BaseModel):
    """Keys under ``compression:`` (named as in Hermes so its users feel at home)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    threshold: float = Field(0.50, gt=0.0, lt=1.0)
    model_thresholds: dict[str, float] = Field(default_factory=dict)
    target_ratio: float = Field(0.20, gt=0.0, lt=1.0)
    protect_first_n: int = Field(3, ge=0)
    protect_last_n: int = Field(20, ge=1)
    min_tail_user_messages: int = Field(1, ge=1)
    hygiene_threshold: float = Field(0.85, gt=0.0, le=1.0)
    summary_model: str | None = None
    cooldown_seconds: float = Field(600.0, ge=0.0)
    max_consecutive_failures: int = Field(3, ge=1)
    tool_result_prune_chars: int = Field(200, ge=50)
    budget_tokens: int | None = Field(DEFAULT_BUDGET_TOKENS, ge=1000, le=MAX_TOKEN_COUNT)
    """The context budget: thresholds apply to min(window, budget); None: the model's window."""
    prune_at: float = Field(0.35, gt=0.0, lt=1.0)
    """Share of the window where the no-call prune of old tool output fires (below ``threshold``)."""
    cold_prune: bool = True
    """Prune old tool output before a call whose cached prefix has expired anyway (no cache cost)."""
    cold_prune_min_tokens: int = Field(8000, ge=0)
    strategies: list[str] = Field(default_factory=lambda: list(DEFAULT_STRATEGIES))
    """The default engine's strategies, cheapest first; a strategy left out is off."""
    memory_flush: bool = True
    """Before a summary archives a range, one silent turn saves memory notes from it (agent.memory_flush)."""
    memory_flush_max_tokens: int = Field(2000, ge=100)
    """Output cap of each call of that turn."""
    memory_flush_input_tokens: int = Field(30_000, ge=1000)
    """The range is shown up to this many tokens (the middle left out past it)."""
    memory_flush_timeout_seconds: float = Field(30.0, gt=0)
    # Server-side strategies (docs/server-side-context.md), both off by default.
    # Tool-result clearing by the API: our stored history stays whole, only the request is edited.
    server_clear_tool_uses: bool = False
    server_clear_at: float = Field(0.35, gt=0.0, lt=1.0)
    """Window share where the API starts clearing (below ``threshold``: the cheaper strategy first)."""
    server_clear_keep: int = Field(3, ge=0)
    server_clear_at_least_tokens: int = Field(20_000, ge=1)
    server_clear_exclude_tools: list[str] = Field(default_factory=list)
    server_clear_tool_inputs: bool = False
    # Compaction by the API: "on_demand" asks for a signed summary where ours would run;
    # "threshold" lets the API summarize inside a chat call (compact_20260112).
    server_compaction: Literal["off", "on_demand", "threshold"] = "off"
    server_compaction_instructions: str | None = Field(None, min_length=1, max_length=16_384)

    @field_validator("server_compaction", mode="before")
    @classmethod
    def _compaction_switch(cls, value: object) -> object:
        # YAML's on/off and true/false mean the default kind, and off.
        if value is True:
            return "on_demand"
        if value is False or value is None:
            return "off"
        return value

    def threshold_for(self, model: str) -> float:
        """The threshold for ``model``: the longest matching key of ``model_thresholds`` wins."""
        matches = [key for key in self.model_thresholds if key in model]
        if not matches:
            return self.threshold
        return self.model_thresholds[max(matches, key=len)]

    def hygiene_threshold_for(self, model: str) -> float:
        """Where hygiene fires for ``model``: never below the in-loop threshold, so a deployer's
        0.9 is not overridden by the 0.85 default."""
        return max(self.hygiene_threshold, self.threshold_for(model))


class ModelSpec(BaseModel):
    """One entry of ``models:``: what a deployer knows of a model (any key may be left out).

    Prices are USD per million tokens; ``budget_tokens`` overrides ``compression.budget_tokens``
    for this model (null: its whole window).
    """

    model_config = ConfigDict(extra="forbid")

    context_window: int | None = Field(None, ge=1000, le=MAX_TOKEN_COUNT)
    max_output: int | None = Field(None, ge=1, le=MAX_TOKEN_COUNT)
    min_cache_prefix: int | None = Field(None, ge=0, le=MAX_TOKEN_COUNT)
    input_price: float | None = Field(None, ge=0)
    output_price: float | None = Field(None, ge=0)
    cache_write_5m_price: float | None = Field(None, ge=0)
    cache_write_1h_price: float | None = Field(None, ge=0)
    cache_read_price: float | None = Field(None, ge=0)
    budget_tokens: int | None = Field(None, ge=1000, le=MAX_TOKEN_COUNT)


class PromptCachingSettings(BaseModel):
    """Keys under ``prompt_caching:``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    cache_ttl: Literal["5m", "1h", "auto"] = "auto"
    mode: Literal["breakpoints", "automatic"] = "breakpoints"
    """"breakpoints": ours (system, the last message block, two more 18 blocks apart);
    "automatic": the API's own (one top-level ``cache_control``, the breakpoint moves to the
    last cacheable block)."""


class LLMSettings(BaseModel):
    """How the Anthropic client behaves (keys under ``llm:``)."""

    model_config = ConfigDict(extra="forbid")

    max_retries: int = Field(2, ge=0, le=10)
    timeout_seconds: float = Field(120.0, gt=0)
    """The longest silence between two reads of an answer (and to connect)."""
    max_retry_wait_seconds: float = Field(60.0, ge=0, le=3600)
    """The longest wait a server's ``retry-after`` is granted; past it the call fails at once."""
    deadline_seconds: float = Field(300.0, gt=0, le=86_400)
    """One call's whole time, every attempt and wait included (a trickling answer ends here)."""
    max_response_bytes: int = Field(16_000_000, ge=100_000, le=1_000_000_000)
    """The most an answer's body may decode to (a stream's events counted together)."""
    max_output_tokens: int = Field(4096, ge=1)
    exact_token_counting: bool = False
    max_tool_iterations: int = Field(25, ge=1)
    tool_output_cap_chars: int = Field(20_000, ge=500)
    defer_tools_above_tokens: int = Field(10_000, ge=0)
    """Past this many tokens of offered definitions, MCP tools are deferred behind the tool search tool."""
    tool_search: Literal["bm25", "regex"] = "bm25"
    """Which of the API's tool search tools goes with deferred tools."""
    fallback: str = Field("off", min_length=1)
    """``off``, or what the API's ``fallbacks`` field takes (``default``: the model Anthropic
    recommends for the refusal's category); sent with the server-side fallback beta."""
