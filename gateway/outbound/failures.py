"""What a person is told when a turn fails: one short sentence that says what happened, never a traceback."""

from __future__ import annotations

from dataclasses import dataclass

from agent.errors import AuthenticationFailed, CompressionError, ContextOverflow, LLMError, SpendLimitReached

OVERLOADED = "The model is overloaded; I'll answer when it is back."
SUMMARIZING = "This conversation is being summarized, one moment."
GAVE_UP = "The model has been unavailable for too long; please send your message again later."
TOO_LONG = (
    "That's too long for me to read in one go, even after summarizing; please send it in smaller parts."
)
NO_ACCESS = "I can't reach the model right now (its API access needs attention); an admin has to fix it."
BROKEN = "Something went wrong on my side while answering that; please try again."
SET_ASIDE = (
    "I couldn't process this message after several tries, so I've set it aside for an admin to look at; "
    "your other messages are answered as usual, and you can send this one again, perhaps differently."
)
UNDELIVERED = (
    "I wrote a reply but couldn't deliver it here after several tries; an admin can see it. "
    "Ask me again if you still need it."
)


@dataclass(frozen=True, slots=True)
class Failure:
    """``retry``: try the turn again later (``text`` is then a notice); else ``text`` is the reply."""

    retry: bool
    text: str


def classify(exc: BaseException) -> Failure:
    """The user-facing outcome of a turn that raised ``exc``."""
    if isinstance(exc, CompressionError):
        # Our compressor never raises it (a failed summary falls back or leaves the session as it
        # was); a pluggable ContextEngine may, and its turn is then retried with this notice.
        return Failure(True, SUMMARIZING)
    if isinstance(exc, LLMError) and exc.retryable:
        return Failure(True, OVERLOADED)
    if isinstance(exc, ContextOverflow):
        return Failure(False, TOO_LONG)
    if isinstance(exc, AuthenticationFailed | SpendLimitReached):
        return Failure(False, NO_ACCESS)
    return Failure(False, BROKEN)
