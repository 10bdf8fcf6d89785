"""The console on a real terminal (a pseudo-terminal): prompt, Rich replies, line editing, Ctrl-D to leave."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gateway.serving.commands import ADMIN_HELP, HELP
from tests.process_env import clean_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")


def _read_until(fd: int, needle: bytes, seen: bytearray, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen.extend(os.read(fd, 4096))
            except OSError:  # the child closed the terminal
                break
    return needle in seen


def _env(tmp_path: Path) -> dict[str, str]:
    env = clean_env()
    # Wide enough that no reply line wraps: a line break on the screen is one the reply made.
    env.update({"HYGIEIA_DATA_DIR": str(tmp_path), "COLUMNS": "200", "TERM": "xterm"})
    return env


def _own_terminal() -> None:
    """In the child: a session of its own with the pseudo-terminal as its controlling terminal, as
    a shell gives it (so Ctrl-C typed on it is a SIGINT to the child)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _read_until_prompt(fd: int, seen: bytearray, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not seen.endswith(PROMPT) and time.monotonic() < deadline:
        _read_until(fd, PROMPT + b"\x00", seen, timeout=0.3)  # a needle never shown: read what comes
    return seen.endswith(PROMPT)


@contextmanager
def chat_terminal(
    tmp_path: Path, *, with_stderr: bool, leave: bytes = b"\x04"
) -> Iterator[tuple[int, bytearray]]:
    """``hygieia run`` on a pseudo-terminal: (its master fd, what it showed so far), once it shows its
    prompt; ``leave`` typed on exit (Ctrl-D: end of input), the process then ends with 0 and the
    terminal is left in the state it was found in."""
    master, slave = pty.openpty()
    found = termios.tcgetattr(slave)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "run"],
        stdin=slave,
        stdout=slave,
        stderr=slave if with_stderr else subprocess.DEVNULL,  # with it: what a person sees
        env=_env(tmp_path),
        close_fds=True,
        preexec_fn=_own_terminal,
    )
    seen = bytearray()
    try:
        assert _read_until(master, b"Ctrl-D to leave", seen), seen.decode(errors="replace")
        assert _read_until_prompt(master, seen), seen.decode(errors="replace")
        yield master, seen
        # Ctrl-D and Ctrl-C act at the prompt: wait for it (the last reply is out).
        assert _read_until_prompt(master, seen), seen.decode(errors="replace")
        os.write(master, leave)
        assert proc.wait(timeout=30) == 0
        assert termios.tcgetattr(slave) == found  # echo and line mode back, whatever readline set
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(slave)
        os.close(master)


PROMPT = "› ".encode()


def _lines(seen: bytearray) -> list[str]:
    """The screen as lines: control sequences (colours, cursor moves) dropped, trailing blanks cut."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode(errors="replace"))
    return [line.rstrip() for line in re.split(r"\r?\n", text.replace("\r\n", "\n"))]


def test_the_interactive_console_answers_and_leaves_on_ctrl_d(tmp_path: Path) -> None:
    with chat_terminal(tmp_path, with_stderr=False) as (master, seen):
        os.write(master, b"walrus on the terminal\n")
        assert _read_until(master, b"walrus on the terminal", seen)  # the terminal's echo
        assert _read_until(master, b"got your message", seen), seen.decode(errors="replace")


def test_the_chat_terminal_shows_no_log_records_which_go_to_the_log_file_instead(tmp_path: Path) -> None:
    with chat_terminal(tmp_path, with_stderr=True) as (master, seen):
        os.write(master, b"/context\n")
        assert _read_until(master, b"free", seen), seen.decode(errors="replace")
    screen = seen.decode(errors="replace")
    assert "hygieia is running" not in screen and '{"ts"' not in screen
    # /context drawn as a table (its first column as wide as its longest part's name)
    assert re.search(r"│ history +│", screen) and re.search(r"│ tool out +│", screen), screen
    assert "```" not in screen
    log = (tmp_path / "logs" / "hygieia.log").read_text()
    assert "hygieia is running" in log and "OFFLINE MODE" in log


def test_help_keeps_one_command_a_line_on_the_chat_terminal(tmp_path: Path) -> None:
    with chat_terminal(tmp_path, with_stderr=False) as (master, seen):
        os.write(master, b"/help\n")
        assert _read_until(master, b"/restore", seen), seen.decode(errors="replace")
    shown = _lines(seen)
    expected = ["Commands:", *(f"/{name} — {text}" for name, text in {**HELP, **ADMIN_HELP}.items())]
    start = shown.index(expected[0])
    assert shown[start : start + len(expected)] == expected


def test_status_keeps_one_fact_a_line_on_the_chat_terminal(tmp_path: Path) -> None:
    with chat_terminal(tmp_path, with_stderr=False) as (master, seen):
        os.write(master, b"/status\n")
        assert _read_until(master, b"Compactions:", seen), seen.decode(errors="replace")
    shown = _lines(seen)
    model = next(i for i, line in enumerate(shown) if line.startswith("Model:"))
    assert shown[model + 1].startswith("Chat overrides:"), shown[model:]
    assert any(line.startswith("Compactions:") for line in shown[model + 2 :]), shown[model:]


def test_ctrl_l_clears_the_screen_and_keeps_the_line_being_typed(tmp_path: Path) -> None:
    with chat_terminal(tmp_path, with_stderr=False) as (master, seen):
        os.write(master, b"walrus")
        assert _read_until(master, b"walrus", seen)
        os.write(master, b"\x0c")  # Ctrl-L
        assert _read_until(master, b"\x1b[2J" + PROMPT + b"walrus", seen), seen.decode(errors="replace")
        os.write(master, b" tusk\n")
        # The message is the line as typed, without the Ctrl-L: the reply quotes it.
        assert _read_until(master, "“walrus tusk”".encode(), seen), seen.decode(errors="replace")


def test_ctrl_c_at_the_prompt_stops_and_leaves_the_terminal_as_it_was(tmp_path: Path) -> None:
    with chat_terminal(tmp_path, with_stderr=True, leave=b"\x03"):
        pass
    log = (tmp_path / "logs" / "hygieia.log").read_text()
    assert "SIGINT received" in log


def test_piped_input_with_a_terminal_on_stderr_keeps_the_log_off_the_screen_and_says_offline_once(
    tmp_path: Path,
) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "run"],
        stdin=subprocess.PIPE,
        stdout=slave,
        stderr=slave,  # `printf 'hello\n' | hygieia run` typed in a terminal
        env=_env(tmp_path),
        close_fds=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"hello\n/status\n")
        proc.stdin.close()
        assert _read_until(master, b"Compactions:", seen), seen.decode(errors="replace")
        assert proc.wait(timeout=30) == 0
        _read_until(master, b"\x00", seen, timeout=0.5)  # the last bytes, if any
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    screen = seen.decode(errors="replace")
    assert screen.count("OFFLINE MODE") == 1, screen
    assert "INFO" not in screen and "hygieia is running" not in screen and "Running upgrade" not in screen
    assert "got your message" in screen
    log = (tmp_path / "logs" / "hygieia.log").read_text()
    assert "hygieia is running" in log and "OFFLINE MODE" in log


def test_piped_input_and_a_piped_stderr_say_offline_once(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "run"],
        input=b"hello\n",
        capture_output=True,
        env=_env(tmp_path),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"got your message" in proc.stdout
    assert proc.stderr.decode().count("OFFLINE MODE") == 1, proc.stderr.decode()
