"""How big a conversation is, as the compressor reckons it: per-message estimates, scaled to the
provider's real count, measured once per compaction."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.engines.compressor.boundaries import Boundaries
from agent.engines.compressor.prune import unprunable_tokens
from agent.tokens import estimate_message_tokens, estimate_text_tokens, prompt_tokens_from_rough
from agent.types import AgentSession, ChatMessage, ContextState

SUMMARY_RATIO = 0.20
SUMMARY_MIN_TOKENS = 2000
SUMMARY_MAX_TOKENS = 12_000
SUMMARY_WINDOW_SHARE = 0.05


def summary_budget(content_tokens: int, window: int) -> int:
    """clamp(content x 0.20, 2000, min(window x 0.05, 12000)); the ceiling wins on small windows."""
    ceiling = int(min(window * SUMMARY_WINDOW_SHARE, SUMMARY_MAX_TOKENS))
    return min(ceiling, max(SUMMARY_MIN_TOKENS, int(content_tokens * SUMMARY_RATIO)))


@dataclass(frozen=True, slots=True)
class Sizes:
    """Estimated tokens per message and how estimates map to the caller's (real) unit."""

    per_message: list[int]
    system: int
    scale: float
    offset: int
    token_scale: float | None
    rough: list[int] = field(default_factory=list)  # uncalibrated, per message (estimated once)

    def of(self, m: ChatMessage) -> int:
        return self.scaled(estimate_message_tokens(m))

    def scaled(self, rough: int) -> int:
        return math.ceil(rough * self.token_scale) if self.token_scale else rough

    def real(self, estimate: int) -> int:
        # The larger of a proportional and an additive correction: over- beats under-estimating.
        return max(round(estimate * self.scale), estimate + self.offset)

    def estimate_of(self, real: float) -> int:
        """The inverse of :meth:`real`: how many estimated tokens fit ``real`` real ones."""
        return max(1, int(min(real / self.scale, real - self.offset)))


def measure(
    session: AgentSession,
    state: ContextState,
    messages: Sequence[ChatMessage],
    prompt_tokens: int | None,
) -> tuple[Sizes, int]:
    """The sizes of ``messages`` and the real prompt size (``prompt_tokens`` when the caller
    knows it, else the estimate corrected by the session's calibration)."""
    system = estimate_text_tokens(session.system_prompt)
    # Each message is estimated once; the prompt estimate below reuses the sum.
    rough = [estimate_message_tokens(m) for m in messages]
    probe = Sizes([], system, 1.0, 0, state.token_scale)
    per = [probe.scaled(r) for r in rough]
    estimate = system + sum(per)
    real = (
        prompt_tokens
        if prompt_tokens is not None
        else prompt_tokens_from_rough(session.system_prompt, sum(rough), state)
    )
    scale = min(3.0, max(0.5, real / estimate)) if estimate else 1.0
    return Sizes(per, system, scale, max(0, real - estimate), state.token_scale, rough), real


def prune_floor(sizes: Sizes, messages: Sequence[ChatMessage], bounds: Boundaries) -> int:
    """A lower bound of the size after pruning alone: what pruning cannot shorten (each
    message's text) before where the tail's budget began, and everything from there on."""
    start = bounds.protect_start
    return (
        sizes.system
        + sum(sizes.scaled(unprunable_tokens(m)) for m in messages[:start])
        + sum(sizes.per_message[start:])
    )
