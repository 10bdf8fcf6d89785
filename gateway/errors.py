"""The gateway's branch of the error tree: platform, delivery and media failures.

The root, :class:`~agent.errors.HygieiaError`, lives in ``agent.errors`` so that both sides share
one tree (the agent's own errors and the storage protocol's live there); what only the platform
side raises lives here, so the agent never learns of Telegram or files.
"""

from __future__ import annotations

from agent.errors import HygieiaError


class GatewayError(HygieiaError):
    """Root of the errors only the platform side raises."""


class AdapterError(GatewayError):
    """A platform adapter failed (send rejected, platform unreachable). ``permanent``: the
    platform refused this for good, so trying again cannot help (see :class:`DeliveryRefused`)."""

    permanent: bool = False


class DeliveryRefused(AdapterError):
    """The platform refused the send with a final 4xx (not 429): the chat is gone, the bot was
    blocked or removed, the message is invalid. The outbox dead-letters it at once instead of
    retrying with backoff."""

    permanent = True


class DraftRefused(AdapterError):
    """The platform will not show a draft in this chat; the reply is shown by edits instead."""


class MediaError(GatewayError):
    """A file we cannot show the model; the message is one short sentence for the user."""
