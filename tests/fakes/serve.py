"""Run the fake servers by hand, for a developer trying the service without the internet.

    python -m tests.fakes anthropic --port 8090 [--context-window 20000]
    python -m tests.fakes telegram --port 8081 [--token T] [--user-id 4242] [--lines FILE]
    python -m tests.fakes discord --port 8082 [--token T] [--user-id 4242] [--lines FILE]

Each prints the environment to export for ``hygieia run`` and serves until Ctrl-C. The fake
Anthropic answers ``ack: <your words>`` (and a structured summary to the compressor) and logs
one line per request with its token count. The fake Telegram and the fake Discord read lines
from stdin and deliver each as a DM from ``--user-id`` (``group: ...`` lines go to a demo group,
or a server's text channel, instead), and ``--lines FILE`` says a whole file the same way once
the bot connects; the bot's answers are printed as they arrive.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import re
import signal
import stat
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.anthropic import (
    Answer,
    FakeAnthropic,
    default_responder,
    error_reply,
    is_summary_request,
)
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram

DEFAULT_TOKEN = "123456:FAKE-token_for_trying_by_hand"
DEFAULT_DISCORD_TOKEN = "FAKE.discord-token.for-trying-by-hand"
DISCORD_DM_CHANNEL_ID = 1_300_000_000_000_000_300
DEFAULT_USER_ID = 4242
DEMO_GROUP_ID = -1001000000001
GROUP_PREFIX = "group:"


def _say(text: str) -> None:
    print(text, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes", description="Fake Anthropic / Telegram / Discord servers on 127.0.0.1."
    )
    sub = parser.add_subparsers(dest="which", required=True)
    anthropic = sub.add_parser("anthropic", help="the Anthropic Messages API")
    anthropic.add_argument("--port", type=int, default=8090)
    anthropic.add_argument(
        "--context-window",
        type=int,
        default=200_000,
        help="the chat model's window in tokens: a longer chat prompt gets 400 'prompt is too long' "
        "(set HYGIEIA_CONTEXT_WINDOW to the same number)",
    )
    telegram = sub.add_parser("telegram", help="the Telegram Bot API; stdin lines become DMs")
    telegram.add_argument("--port", type=int, default=8081)
    telegram.add_argument("--token", default=DEFAULT_TOKEN)
    telegram.add_argument("--user-id", type=int, default=DEFAULT_USER_ID, help="who the stdin DMs come from")
    telegram.add_argument("--username", default="dev", help="that user's @username")
    telegram.add_argument(
        "--lines", type=Path, help="a file of lines to say (like typed ones) once the bot connects"
    )
    telegram.add_argument(
        "--pace", type=float, default=0.3, help="seconds to wait after each of those lines the bot answers"
    )
    discord = sub.add_parser("discord", help="the Discord REST API and gateway; stdin lines become DMs")
    discord.add_argument("--port", type=int, default=8082)
    discord.add_argument("--token", default=DEFAULT_DISCORD_TOKEN)
    discord.add_argument("--user-id", type=int, default=DEFAULT_USER_ID, help="who the stdin DMs come from")
    discord.add_argument("--username", default="dev", help="that user's name")
    discord.add_argument(
        "--lines", type=Path, help="a file of lines to say (like typed ones) once the bot connects"
    )
    discord.add_argument(
        "--pace", type=float, default=0.3, help="seconds to wait after each of those lines the bot answers"
    )
    return parser


async def _until_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


# --- anthropic -------------------------------------------------------------------------------


async def serve_anthropic(port: int, context_window: int) -> None:
    fake: FakeAnthropic

    def responder(body: dict[str, Any]) -> Answer:
        summary = is_summary_request(body)
        tokens = fake.count_tokens(body)
        share = f"{100 * tokens / context_window:.0f}%"
        line = f"{len(body.get('messages') or [])} messages, {tokens} tokens ({share} of the chat window)"
        _say(f"[anthropic] {'summary' if summary else 'chat'}: {line}")
        if not summary and tokens > context_window:
            return error_reply(
                400,
                "invalid_request_error",
                f"prompt is too long: {tokens} tokens > {context_window} maximum",
            )
        return default_responder(body)

    # The window is the chat model's; the summarizer (a Haiku in real life) has the usual 200k.
    fake = FakeAnthropic(context_window=max(context_window, 200_000), responder=responder, port=port)
    async with fake:
        _say(f"fake Anthropic on {fake.base_url}, context window {context_window} tokens")
        _say("export:")
        _say(f"  ANTHROPIC_BASE_URL={fake.base_url} ANTHROPIC_API_KEY=fake")
        _say("Ctrl-C to stop.")
        await _until_signal()


# --- telegram --------------------------------------------------------------------------------


def _clock_ids() -> itertools.count[int]:
    """Ids that keep growing across restarts of the fake: a running bot skips update ids below its
    confirmed offset, and the inbox drops a (chat, message id) it has already stored."""
    return itertools.count(int(time.time() * 1000))


@dataclass
class _User:
    """The developer's side of the chat: one user, their DMs and the demo group."""

    fake: FakeTelegram
    user_id: int
    username: str
    message_ids: itertools.count[int] = field(default_factory=_clock_ids)

    def say(self, line: str) -> bool:
        """Send one line; True when the bot will answer it (a DM, or a group line mentioning it)."""
        text = line.rstrip("\r\n")
        if not text.strip():
            return False
        if text.startswith(GROUP_PREFIX):  # to the demo group: ambient unless it mentions the bot
            text = text.removeprefix(GROUP_PREFIX).strip()
            chat_id, chat_type, shown = DEMO_GROUP_ID, "supergroup", "group"
        else:
            chat_id, chat_type, shown = self.user_id, "private", "bot"
        self.fake.push_message(
            chat_id,
            text,
            user_id=self.user_id,
            username=self.username,
            first_name=self.username,
            chat_type=chat_type,
            message_id=next(self.message_ids),
        )
        _say(f"[you -> {shown}] {text}")
        return chat_type == "private" or f"@{self.fake.bot_user['username']}" in text


async def serve_telegram(
    port: int,
    token: str,
    user_id: int,
    username: str,
    script: list[str] | None = None,
    pace: float = 0.3,
) -> None:
    async with FakeTelegram(token=token, port=port, first_update_id=next(_clock_ids())) as fake:
        user = _User(fake, user_id, username)
        _say(f"fake Telegram Bot API on {fake.root} (bot @{fake.bot_user['username']})")
        _say("export:")
        _say(
            f"  TELEGRAM_BOT_TOKEN={token} HYGIEIA_TELEGRAM_BASE_URL={fake.root} "
            f"HYGIEIA_ALLOWED_USERS=telegram:{user_id}"
        )
        _say(f"Type a line and press Enter: it arrives as a DM from user {user_id} (@{username}).")
        _say(
            f"A line starting with '{GROUP_PREFIX}' goes to group {DEMO_GROUP_ID} instead: stored as "
            f"ambient context unless it mentions @{fake.bot_user['username']}."
        )
        _say("Ctrl-C to stop.")
        tasks = [asyncio.create_task(_print_replies(fake)), asyncio.create_task(_push_stdin(user.say))]
        if script is not None:
            connected = fake.wait_for_call("getUpdates", timeout=7 * 24 * 3600)
            tasks.append(asyncio.create_task(_push_script(user.say, connected, script, pace)))
        try:
            await _until_signal()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _print_replies(fake: FakeTelegram) -> None:
    shown = 0
    while True:
        for sent in fake.sent[shown:]:
            topic = f" topic {sent.message_thread_id}" if sent.message_thread_id else ""
            _say(f"[bot -> chat {sent.chat_id}{topic}] {sent.plain_text}")
        shown = len(fake.sent)
        del fake.requests[:-200]  # polling records a call every fraction of a second: keep memory flat
        await asyncio.sleep(0.1)


async def _push_script(
    say: Callable[[str], bool], connected: Awaitable[object], lines: list[str], pace: float
) -> None:
    """Once the bot is connected, say each of ``lines``; ``pace`` seconds after each one it answers."""
    _say(f"{len(lines)} scripted lines will be sent once the bot connects (start `hygieia run`).")
    await connected
    for line in lines:
        if say(line):
            await asyncio.sleep(pace)
    _say(f"all {len(lines)} scripted lines sent.")


async def _push_stdin(say: Callable[[str], bool]) -> None:
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or sys.stdin.isatty()):
        # A file or /dev/null: epoll refuses those, and reading them never blocks for long.
        for line in sys.stdin:
            say(line)
        return
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    )
    try:
        while line := await reader.readline():
            say(line.decode("utf-8", errors="replace"))
        # End of input: keep serving (the bot may still be answering) until Ctrl-C.
    finally:
        transport.close()


# --- discord ---------------------------------------------------------------------------------


@dataclass
class _DiscordUser:
    """The developer's side on Discord: DMs to the bot, and the demo server's text channel."""

    fake: FakeDiscord
    user_id: int
    username: str

    def say(self, line: str) -> bool:
        """Send one line; True when the bot will answer it (a DM, or a channel line mentioning it)."""
        text = line.rstrip("\r\n")
        if not text.strip():
            return False
        # "@hygieia", or the Telegram fake's "@hygieia_test_bot", so one script serves both fakes.
        mention = re.compile(rf"@{re.escape(self.fake.bot_user['username'])}(?:_test_bot)?\b")
        if text.startswith(GROUP_PREFIX):  # to the server's channel: ambient unless it mentions the bot
            text = text.removeprefix(GROUP_PREFIX).strip()
            mentioned = mention.search(text) is not None
            self.fake.push_message(
                self.fake.channel_id,
                mention.sub(self.fake.bot_mention, text),
                author_id=self.user_id,
                author_name=self.username,
                guild_id=self.fake.guild_id,
                mentions_bot=mentioned,
            )
            _say(f"[you -> channel] {text}")
            return mentioned
        self.fake.push_message(
            DISCORD_DM_CHANNEL_ID, text, author_id=self.user_id, author_name=self.username, guild_id=None
        )
        _say(f"[you -> bot] {text}")
        return True


async def serve_discord(
    port: int,
    token: str,
    user_id: int,
    username: str,
    script: list[str] | None = None,
    pace: float = 0.3,
) -> None:
    async with FakeDiscord(token=token, port=port) as fake:
        user = _DiscordUser(fake, user_id, username)
        name = fake.bot_user["username"]
        _say(f"fake Discord on {fake.root} (bot @{name}, gateway {fake.gateway_url})")
        _say("export:")
        _say(
            f"  DISCORD_BOT_TOKEN={token} HYGIEIA_DISCORD_API_BASE={fake.api_base} "
            f"HYGIEIA_DISCORD_GATEWAY_URL={fake.gateway_url} HYGIEIA_ALLOWED_USERS=discord:{user_id}"
        )
        _say(f"Type a line and press Enter: it arrives as a DM from user {user_id} ({username}).")
        _say(
            f"A line starting with '{GROUP_PREFIX}' goes to the server's channel {fake.channel_id} instead: "
            f"stored as ambient context unless it mentions @{name}."
        )
        _say("Ctrl-C to stop.")
        tasks = [
            asyncio.create_task(_print_discord_replies(fake)),
            asyncio.create_task(_push_stdin(user.say)),
        ]
        if script is not None:
            tasks.append(asyncio.create_task(_push_script(user.say, _identified(fake), script, pace)))
        try:
            await _until_signal()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _identified(fake: FakeDiscord) -> None:
    """Until a bot has identified on the gateway (and so receives the messages)."""
    # The fake keeps a counter, not an event, for IDENTIFY; a person's demo can poll it.
    while fake.identify_count == 0:  # noqa: ASYNC110
        await asyncio.sleep(0.2)
    await asyncio.sleep(1)  # READY and GUILD_CREATE handled before the first message


async def _print_discord_replies(fake: FakeDiscord, settle: float = 1.0) -> None:
    """Each reply once it has stopped changing for ``settle`` seconds: answers stream by edits, and
    one line per state worth reading beats a line per edit. A later edit is printed again."""
    seen: dict[int, tuple[str, float]] = {}  # message id -> (text, when it last changed)
    printed: dict[int, str] = {}
    while True:
        now = time.monotonic()
        for sent in fake.sent[-50:]:
            text = fake.current_text(sent.message_id)
            if seen.get(sent.message_id, ("", 0.0))[0] != text:
                seen[sent.message_id] = (text, now)
            if now - seen[sent.message_id][1] >= settle and printed.get(sent.message_id) != text:
                verb = "edits in" if sent.message_id in printed else "->"
                _say(f"[bot {verb} channel {sent.channel_id}] {text}")
                printed[sent.message_id] = text
        del fake.requests[:-200]  # the gateway's heartbeats and typing calls: keep memory flat
        await asyncio.sleep(0.1)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        if args.which == "anthropic":
            asyncio.run(serve_anthropic(args.port, args.context_window))
            return 0
        script = args.lines.read_text(encoding="utf-8").splitlines() if args.lines else None
        serve = serve_telegram if args.which == "telegram" else serve_discord
        asyncio.run(serve(args.port, args.token, args.user_id, args.username, script, args.pace))
    return 0
