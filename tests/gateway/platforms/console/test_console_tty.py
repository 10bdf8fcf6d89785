"""The console on a real terminal (a pseudo-terminal): prompt, Rich replies, Ctrl-D to leave."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

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


@contextmanager
def chat_terminal(tmp_path: Path, *, with_stderr: bool) -> Iterator[tuple[int, bytearray]]:
    """``hygieia run`` on a pseudo-terminal: (its master fd, what it showed so far); Ctrl-D on exit."""
    env = clean_env()
    env.update({"HYGIEIA_DATA_DIR": str(tmp_path), "COLUMNS": "120", "TERM": "xterm"})
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "run"],
        stdin=slave,
        stdout=slave,
        stderr=slave if with_stderr else subprocess.DEVNULL,  # with it: what a person sees
        env=env,
        close_fds=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        assert _read_until(master, b"Ctrl-D to leave", seen), seen.decode(errors="replace")
        yield master, seen
        os.write(master, b"\x04")  # Ctrl-D: end of input
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


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
    assert "│ history │" in screen and "│ free    │" in screen, screen  # /context drawn as a table
    assert "```" not in screen
    log = (tmp_path / "logs" / "hygieia.log").read_text()
    assert "hygieia is running" in log and "OFFLINE MODE" in log
