"""A provider that stops a sub-agent once its token budget is spent."""

from __future__ import annotations

from agent.errors import HygieiaError
from agent.provider import LLMProvider, LLMRequest, LLMResponse


class BudgetSpent(HygieiaError):
    """The sub-agent used its ``delegation.max_tokens``; no further call is made."""


class BudgetedProvider:
    """``inner``, refusing a call once the calls so far used ``max_tokens`` (input, cache and
    output tokens of every call added up: what the run cost, not the size of one prompt)."""

    def __init__(self, inner: LLMProvider, max_tokens: int) -> None:
        self.name = inner.name
        self._inner = inner
        self._max = max_tokens
        self.used = 0
        self.calls = 0

    async def create(self, request: LLMRequest) -> LLMResponse:
        if self.used >= self._max:
            raise BudgetSpent(f"token budget spent ({self.used} of {self._max})")
        response = await self._inner.create(request)
        self.calls += 1
        self.used += response.usage.context_tokens + response.usage.output_tokens
        return response

    async def count_tokens(self, request: LLMRequest) -> int | None:
        return await self._inner.count_tokens(request)

    async def aclose(self) -> None:
        """The inner provider belongs to the service, which closes it."""


def _conforms(provider: BudgetedProvider) -> LLMProvider:
    return provider
