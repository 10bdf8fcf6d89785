"""Posting to a Discord channel: the channel object, the reply reference, and Discord's failures
mapped once to ours (a final 4xx is a :class:`DeliveryRefused`, the rest may pass)."""

from __future__ import annotations

import asyncio

import aiohttp
import discord

from gateway.errors import AdapterError, DeliveryRefused
from gateway.platforms.base import OutboundTarget

MENTIONS = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=True)
"""A reply never pings everyone or a role; it may ping the person it answers."""
SEND_ERRORS = (discord.HTTPException, aiohttp.ClientError, OSError, asyncio.TimeoutError)


def channel_for(client: discord.Client, channel_id: int) -> discord.abc.Messageable:
    """The cached channel, else a partial one: posting needs only the id, not a REST fetch."""
    cached = client.get_channel(channel_id)
    if isinstance(cached, discord.abc.Messageable):
        return cached
    return client.get_partial_messageable(channel_id)


async def post(
    channel: discord.abc.Messageable, channel_id: int, text: str, reference: discord.MessageReference | None
) -> str:
    try:
        if reference is None:
            sent = await channel.send(text, allowed_mentions=MENTIONS)
        else:
            sent = await channel.send(text, reference=reference, allowed_mentions=MENTIONS)
    except discord.Forbidden as exc:
        raise DeliveryRefused(f"Discord: no permission to post in channel {channel_id}: {exc.text}") from exc
    except discord.NotFound as exc:
        raise DeliveryRefused(f"Discord: unknown channel {channel_id}: {exc.text}") from exc
    except discord.HTTPException as exc:
        raise refusal(exc, "Discord send failed") from exc
    except SEND_ERRORS as exc:
        raise AdapterError(f"Discord send failed: {exc}") from exc
    return str(sent.id)


def refusal(exc: discord.HTTPException, what: str) -> AdapterError:
    """A final 4xx (bad request, missing access, unknown channel) is a :class:`DeliveryRefused`;
    429 (what discord.py could not wait out) and 5xx may pass, so they are retried."""
    final = 400 <= exc.status < 500 and exc.status != 429
    return (DeliveryRefused if final else AdapterError)(f"{what}: {exc}")


def reply_reference(target: OutboundTarget, channel_id: int) -> discord.MessageReference | None:
    if not target.reply_to_message_id:
        return None
    # A deleted original must not lose the answer: send it as a plain message then.
    return discord.MessageReference(
        message_id=int(target.reply_to_message_id), channel_id=channel_id, fail_if_not_exists=False
    )
