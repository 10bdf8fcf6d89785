"""The console adapter: the local operator's chat, one persistent conversation (``console:<OS user>``).

On a terminal it is an interactive chat (a prompt, replies rendered with Rich). When stdin
is not a terminal it plays the lines as a scripted user: one message per line (blank lines
skipped), each sent once the reply to the previous one has been printed to stdout, and
:attr:`ConsoleAdapter.finished` is set at end of input once the last reply is out.

A reply is recognised by its ``reply_to_message_id``: the gateway sets it to the message
being answered, and notices (hygiene, "overloaded") come without it. Stdin is read by a
daemon thread so that a blocked read never holds up shutdown.

On the process's own terminal, lines are read with GNU readline (:func:`input`), asked for one
at a time once the previous reply is out: line editing, history, and Ctrl-L to clear the screen.
The terminal's settings are saved at start and put back at stop, since a thread still inside
readline when the process leaves would leave the terminal without echo.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import sys
import termios
import threading
import uuid
from typing import Any, TextIO

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
        stderr: TextIO | None = None,
        interactive: bool | None = None,
        reply_timeout: float = 900.0,
    ) -> None:
        self.user = user or console_user()
        self._stdin = stdin if stdin is not None else sys.stdin
        self._stdout = stdout if stdout is not None else sys.stdout
        self._stderr = stderr if stderr is not None else sys.stderr
        self.interactive = self._stdin.isatty() if interactive is None else interactive
        # input() edits lines with readline only on the process's own stdin and stdout.
        self._readline = self.interactive and self._stdin is sys.stdin and self._stdout is sys.stdout
        self._line_wanted = threading.Event()
        self._saved_tty: list[Any] | None = None
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
        read = self._read_prompted if self._readline else self._read_lines
        if self._readline:
            with contextlib.suppress(OSError, termios.error):
                self._saved_tty = termios.tcgetattr(self._stdin.fileno())
        reader = threading.Thread(target=read, args=(loop,), name="console-stdin", daemon=True)
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
        saved, self._saved_tty = self._saved_tty, None
        if saved is not None:
            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(self._stdin.fileno(), termios.TCSADRAIN, saved)
        self._started = False

    @property
    def watched(self) -> bool:
        """A person reads this terminal: the chat is interactive, or stderr is a terminal."""
        return self.interactive or (hasattr(self._stderr, "isatty") and self._stderr.isatty())

    def announce(self, text: str) -> None:
        """A line for the operator (not a chat message): Rich on a terminal, stderr from a pipe."""
        if self._rich is not None:
            self._rich.print(f"[bold yellow]{text}[/bold yellow]", highlight=False)
        else:
            print(text, file=self._stderr, flush=True)

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

    def _read_prompted(self, loop: asyncio.AbstractEventLoop) -> None:
        import readline  # noqa: F401  (imported for its effect: input() edits lines with it)

        try:
            while True:
                self._line_wanted.wait()
                self._line_wanted.clear()
                line = input(PROMPT)
                loop.call_soon_threadsafe(self._lines.put_nowait, line)
        except EOFError:
            pass
        except (OSError, ValueError) as exc:
            _log.warning("console input failed: %s", exc)
        finally:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._lines.put_nowait, None)

    async def _drive(self, handler: InboundHandler) -> None:
        count = 0
        while True:
            if self._readline:
                self._line_wanted.set()
            elif self._rich is not None:
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
