"""The console adapter: the local operator's chat, one persistent conversation (``console:<OS user>``).

On a terminal it is an interactive chat (a prompt, replies rendered with Rich). When stdin
is not a terminal it plays the lines as a scripted user: one message per line (blank lines
skipped), each sent once the reply to the previous one has been printed to stdout, and
:attr:`ConsoleAdapter.finished` is set at end of input once the last reply is out.

A reply is recognised by its ``reply_to_message_id``: the gateway sets it to the message
being answered, and notices (hygiene, "overloaded") come without it. Stdin is read by a
daemon thread so that a blocked read never holds up shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import sys
import threading
import uuid
from typing import TextIO

from rich.console import Console
from rich.live import Live

from gateway.errors import AdapterError
from gateway.platforms.base import InboundHandler, InboundMessage, OutboundTarget, PlatformAdapter
from gateway.platforms.console.render import renderable

_log = logging.getLogger(__name__)

PLATFORM = "console"
PROMPT = "› "


def console_user() -> str:
    """The OS user: the console chat's id (a restart continues the same conversation)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


class ConsoleAdapter(PlatformAdapter):
    """See the module docstring."""

    name = PLATFORM
    text_limit = 1_000_000  # a terminal has no message limit: one reply, one write

    def __init__(
        self,
        *,
        user: str | None = None,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        interactive: bool | None = None,
        reply_timeout: float = 900.0,
    ) -> None:
        self.user = user or console_user()
        self._stdin = stdin if stdin is not None else sys.stdin
        self._stdout = stdout if stdout is not None else sys.stdout
        self.interactive = self._stdin.isatty() if interactive is None else interactive
        self._reply_timeout = reply_timeout
        self._rich = Console(file=self._stdout) if self.interactive else None
        self.streams = self.interactive  # a pipe gets each reply whole, as one write
        self._live: Live | None = None
        self._run_id = uuid.uuid4().hex[:10]
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._waiting: dict[str, asyncio.Event] = {}
        self._driver: asyncio.Task[None] | None = None
        self._started = False
        self.finished = asyncio.Event()
        """Set when input has ended and every reply to it has been printed."""
        self.sent_count = 0

    # lifecycle ---------------------------------------------------------------------------
    async def start(self, handler: InboundHandler) -> None:
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        reader = threading.Thread(target=self._read_lines, args=(loop,), name="console-stdin", daemon=True)
        reader.start()
        self._driver = asyncio.create_task(self._drive(handler), name="console")
        if self._rich is not None:
            self._rich.print(
                f"[bold]Hygieia[/bold] console: chat [cyan]console:{self.user}[/cyan]. "
                "Type /help for commands, Ctrl-D to leave.",
                highlight=False,
            )

    async def stop(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None and not driver.done():
            driver.cancel()
            await asyncio.gather(driver, return_exceptions=True)
        self._started = False

    def announce(self, text: str) -> None:
        """A line for the operator (not a chat message): Rich on a terminal, stderr from a pipe."""
        if self._rich is not None:
            self._rich.print(f"[bold yellow]{text}[/bold yellow]", highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)

    # output ------------------------------------------------------------------------------
    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        if not self._started:
            raise AdapterError("the console adapter is not started")
        if self._rich is not None:
            self._rich.print(renderable(text))
            self._rich.print()
        else:
            self._stdout.write(text + "\n")
            self._stdout.flush()
        self.sent_count += 1
        waiter = self._waiting.get(target.reply_to_message_id or "")
        if waiter is not None:
            waiter.set()
        return [f"console-out-{self.sent_count}"]

    async def stream_send(self, target: OutboundTarget, text: str) -> str:
        """Start showing a reply as it is written (the interactive terminal only)."""
        if self._rich is None:
            return await super().stream_send(target, text)
        if self._live is not None:
            self._live.stop()
        self._live = Live(renderable(text), console=self._rich, refresh_per_second=8, transient=False)
        self._live.start()
        self.sent_count += 1
        return f"console-out-{self.sent_count}"

    async def edit(self, target: OutboundTarget, message_id: str, text: str) -> None:
        if self._live is not None:
            self._live.update(renderable(text), refresh=True)

    async def stream_end(self, target: OutboundTarget) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
            if self._rich is not None:
                self._rich.print()
        waiter = self._waiting.get(target.reply_to_message_id or "")
        if waiter is not None:
            waiter.set()

    # input -------------------------------------------------------------------------------
    def _read_lines(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            for line in self._stdin:
                loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\r\n"))
        except (OSError, ValueError) as exc:
            _log.warning("console input failed: %s", exc)
        finally:
            # RuntimeError: the loop is already closed and nobody is waiting.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._lines.put_nowait, None)

    async def _drive(self, handler: InboundHandler) -> None:
        count = 0
        while True:
            if self._rich is not None:
                self._rich.print(PROMPT, end="")
            line = await self._lines.get()
            if line is None:
                break
            if not line.strip():
                continue
            count += 1
            message_id = f"{self._run_id}-{count}"
            waiter = self._waiting[message_id] = asyncio.Event()
            await handler(
                InboundMessage(
                    platform=PLATFORM,
                    chat_id=self.user,
                    user_id=self.user,
                    user_name=self.user,
                    text=line,
                    platform_message_id=message_id,
                    chat_type="dm",
                    addressed=True,
                )
            )
            try:
                await asyncio.wait_for(waiter.wait(), self._reply_timeout)
            except TimeoutError:
                _log.warning("no reply within %.0fs; sending the next line anyway", self._reply_timeout)
            finally:
                del self._waiting[message_id]
        if self._rich is not None:
            self._rich.print()
        self.finished.set()
