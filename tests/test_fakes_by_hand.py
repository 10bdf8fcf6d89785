"""The fakes run by hand as docs/trying-it-by-hand.md says: ``python -m tests.fakes discord`` prints the
environment to export, and ``hygieia run`` started with exactly that answers a scripted line."""

from __future__ import annotations

import queue
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.process_env import clean_env

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    """The process's stdout, line by line, read on a thread (so waits can time out)."""
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return out


def _until(lines: queue.Queue[str], wanted: str, timeout: float) -> list[str]:
    """Every line up to and including the first that contains ``wanted``."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen.append(line)
        if wanted in line:
            return seen
    raise AssertionError(f"no line with {wanted!r} within {timeout:.0f} s; got:\n" + "\n".join(seen))


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in reversed(started):
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_discord_fake_run_by_hand_gets_an_answer_from_hygieia_run(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    script = tmp_path / "lines.txt"
    script.write_text("hello from a person at the keyboard\n", encoding="utf-8")
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes", "discord", "--port", str(_free_port()), "--lines", str(script)],
        cwd=ROOT,
        env=clean_env(),
        stdin=subprocess.PIPE,  # held open, as a terminal would be
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    processes.append(fake)
    out = _lines(fake)
    printed = _until(out, "export:", timeout=60)
    export = out.get(timeout=10)
    env = clean_env()
    env.update(dict(word.split("=", 1) for word in shlex.split(export)))
    env.update({"HYGIEIA_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)})  # no key: offline
    service = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "run"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    processes.append(service)

    answered = _until(out, "[bot -> channel", timeout=120)

    assert any(line.startswith("fake Discord on http://127.0.0.1:") for line in printed)
    assert {"DISCORD_BOT_TOKEN", "HYGIEIA_DISCORD_API_BASE", "HYGIEIA_DISCORD_GATEWAY_URL"} <= set(env)
    assert "[you -> bot] hello from a person at the keyboard" in answered
    assert "hello from a person at the keyboard" in answered[-1]
