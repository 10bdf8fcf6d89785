"""Discord's wire shapes for the fake: JSON payloads as the real API builds them, errors, rate limits."""

from __future__ import annotations

import json
import math
import time
import zlib
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

GUILD_TEXT, DM, PUBLIC_THREAD = 0, 1, 11
OWNER_ID = 1_300_000_000_000_000_999


def application(bot_user: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": bot_user["id"],
        "name": bot_user["username"],
        "icon": None,
        "description": "",
        "bot_public": True,
        "bot_require_code_grant": False,
        "owner": user(OWNER_ID, "owner"),
        "summary": "",
        "verify_key": "0" * 64,
        "team": None,
        "flags": 0,
        "bot": bot_user,
        "interactions_endpoint_url": None,
    }


def guild(guild_id: int, channels: list[dict[str, Any]], bot_user: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(guild_id),
        "name": f"guild-{guild_id % 1000}",
        "icon": None,
        "owner_id": str(OWNER_ID),
        "afk_timeout": 300,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": [everyone(guild_id)],
        "emojis": [],
        "stickers": [],
        "features": [],
        "mfa_level": 0,
        "system_channel_flags": 0,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "nsfw_level": 0,
        "joined_at": iso(datetime.now(UTC)),
        "large": False,
        "unavailable": False,
        "member_count": 2,
        "members": [{**member(), "user": bot_user}],
        "channels": [c for c in channels if c["type"] == GUILD_TEXT],
        "threads": [c for c in channels if c["type"] == PUBLIC_THREAD],
        "voice_states": [],
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
    }


def message(
    message_id: int, channel_id: int, guild_id: int | None, author: dict[str, Any], content: str
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "author": author,
        "content": content,
        "timestamp": iso(datetime.now(UTC)),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "type": 0,
        "flags": 0,
        "components": [],
    }
    if guild_id is not None:
        msg["guild_id"] = str(guild_id)
    return msg


def thread(thread_id: int, parent_id: int, guild_id: int, owner_id: int) -> dict[str, Any]:
    return {
        "id": str(thread_id),
        "guild_id": str(guild_id),
        "parent_id": str(parent_id),
        "owner_id": str(owner_id),
        "name": f"thread-{thread_id % 1000}",
        "type": PUBLIC_THREAD,
        "last_message_id": None,
        "message_count": 0,
        "member_count": 1,
        "rate_limit_per_user": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": iso(datetime.now(UTC)),
            "locked": False,
        },
    }


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


def iso_now() -> str:
    return iso(datetime.now(UTC))


def user(user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": str(user_id),
        "username": name,
        "discriminator": "0",
        "global_name": name.title(),
        "avatar": None,
        "public_flags": 0,
    }
    if bot:
        user["bot"] = True
    return user


def member() -> dict[str, Any]:
    return {"roles": [], "joined_at": iso(datetime.now(UTC)), "deaf": False, "mute": False, "flags": 0}


def everyone(guild_id: int) -> dict[str, Any]:
    return {
        "id": str(guild_id),
        "name": "@everyone",
        "color": 0,
        "hoist": False,
        "position": 0,
        "permissions": str((1 << 41) - 1),
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }


def text_channel(channel_id: int, guild_id: int, position: int) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "guild_id": str(guild_id),
        "type": GUILD_TEXT,
        "name": f"general-{position}",
        "position": position,
        "permission_overwrites": [],
        "parent_id": None,
        "nsfw": False,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
    }


def dm_channel(channel_id: int, recipient: dict[str, Any]) -> dict[str, Any]:
    return {"id": str(channel_id), "type": DM, "last_message_id": None, "recipients": [recipient]}


def json_response(body: Any, status: int = 200) -> web.Response:
    # Exactly "application/json": discord.py reads the body as text when a charset is appended.
    return web.Response(
        body=json.dumps(body).encode(), status=status, headers={"Content-Type": "application/json"}
    )


def invalid_form(name: str, error: dict[str, str]) -> web.Response:
    body = {"message": "Invalid Form Body", "code": 50035, "errors": {name: {"_errors": [error]}}}
    return json_response(body, 400)


def rate_limited(retry_after: float, *, is_global: bool) -> web.Response:
    """Discord's 429: ``retry_after`` in (float) seconds in the body, ``Retry-After`` rounded up."""
    body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": is_global}
    response = json_response(body, 429)
    response.headers["Retry-After"] = str(math.ceil(retry_after))
    response.headers["X-RateLimit-Scope"] = "global" if is_global else "user"
    if is_global:
        response.headers["X-RateLimit-Global"] = "true"
    return response


def frame(op: int, data: Any) -> str:
    """A non-dispatch gateway frame (HELLO, HEARTBEAT_ACK, INVALID_SESSION)."""
    return json.dumps({"op": op, "d": data, "s": None, "t": None})


class Buckets:
    """Fixed-window rate-limit buckets (one per route and channel) and the headers that describe them."""

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._windows: dict[str, tuple[float, int]] = {}

    def take(self, bucket: str) -> float | None:
        """Count one request; when the window is full, the seconds until it resets instead."""
        now = time.monotonic()
        start, count = self._windows.get(bucket, (now, 0))
        if now - start >= self.window:
            start, count = now, 0
        if count >= self.limit:
            return round(self.window - (now - start), 3)
        self._windows[bucket] = (start, count + 1)
        return None

    def stamp(
        self,
        response: web.Response,
        bucket: str,
        *,
        remaining: int | None = None,
        reset_after: float | None = None,
    ) -> None:
        start, count = self._windows.get(bucket, (time.monotonic(), 0))
        after = reset_after if reset_after is not None else max(0.0, self.window - (time.monotonic() - start))
        route = bucket.split(":")[0]
        response.headers["X-RateLimit-Limit"] = str(self.limit)
        response.headers["X-RateLimit-Remaining"] = str(
            remaining if remaining is not None else self.limit - count
        )
        response.headers["X-RateLimit-Reset"] = f"{time.time() + after:.3f}"
        response.headers["X-RateLimit-Reset-After"] = f"{after:.3f}"
        response.headers["X-RateLimit-Bucket"] = f"{zlib.crc32(route.encode()):08x}"
        # Without Via, discord.py takes a 429 for a Cloudflare ban and raises instead of waiting.
        response.headers["Via"] = "1.1 google"
