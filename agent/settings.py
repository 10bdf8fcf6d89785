"""Typed settings the agent takes; the gateway's configuration embeds these models."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MODEL = "claude-sonnet-4-6"
DEFAULT_SUMMARY_MODEL = "claude-haiku-4-5"


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


class PromptCachingSettings(BaseModel):
    """Keys under ``prompt_caching:``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    cache_ttl: Literal["5m", "1h", "auto"] = "5m"


class LLMSettings(BaseModel):
    """How the Anthropic client behaves (keys under ``llm:``)."""

    model_config = ConfigDict(extra="forbid")

    max_retries: int = Field(2, ge=0, le=10)
    timeout_seconds: float = Field(120.0, gt=0)
    max_output_tokens: int = Field(4096, ge=1)
    exact_token_counting: bool = False
    max_tool_iterations: int = Field(25, ge=1)
    tool_output_cap_chars: int = Field(20_000, ge=500)
