"""One exception tree for everything Hygieia raises (the gateway's errors derive from it too)."""

from __future__ import annotations


class HygieiaError(Exception):
    """Root of every error Hygieia raises on purpose."""


class ConfigError(HygieiaError):
    """A configuration value is missing or invalid; the message names the key."""


class LLMError(HygieiaError):
    """The model provider failed. ``retryable`` says whether trying later may help."""

    retryable: bool = False

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ContextOverflow(LLMError):
    """The prompt is longer than the model accepts (HTTP 400 "prompt is too long"), or the prompt
    and ``max_tokens`` together are ("input length and `max_tokens` exceed context limit: X + Y >
    Z"): then ``output_tokens`` is Y and ``actual_tokens`` is X + Y."""

    def __init__(
        self,
        message: str,
        *,
        actual_tokens: int | None = None,
        limit_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        super().__init__(message, status_code=400)
        self.actual_tokens = actual_tokens
        self.limit_tokens = limit_tokens
        self.output_tokens = output_tokens

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's own size, as the API counted it (without the reply's share)."""
        if self.actual_tokens is None:
            return None
        return self.actual_tokens - (self.output_tokens or 0)


class RateLimited(LLMError):
    """HTTP 429; ``retry_after`` in seconds when the provider said."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, status_code=429)
        self.retry_after = retry_after


class Overloaded(LLMError):
    """HTTP 529 or a 5xx: the provider is temporarily unable to answer."""

    retryable = True


class SpendLimitReached(LLMError):
    """The account's credit or spend limit is exhausted; never retried."""


class AuthenticationFailed(LLMError):
    """The API key is missing, wrong or lacks permission."""


class ProviderUnreachable(LLMError):
    """Connection refused, DNS failure or timeout."""

    retryable = True


class InvalidRequest(LLMError):
    """The provider rejected the request for a reason other than its length."""


class CompressionError(HygieiaError):
    """Compaction could not be done (summarizer failed and no fallback was allowed)."""


class ToolError(HygieiaError):
    """A tool refused its input; the message is shown to the model as the tool result."""


class StoreError(HygieiaError):
    """The storage layer failed or was asked for something that does not exist."""


class WriteConflict(StoreError):
    """A write lost a race it did not lock against (a unique conflict); rolled back, safe to redo."""


class NotFound(StoreError):
    """The requested session, message or compaction does not exist."""
