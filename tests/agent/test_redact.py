"""Secrets never survive redaction, wherever they sit in a line."""

from __future__ import annotations

import pytest

from agent.redact import redact

TELEGRAM = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"


@pytest.mark.parametrize(
    "line",
    [
        f"HTTP Request: POST http://127.0.0.1:8081/bot{TELEGRAM}/getUpdates",
        f"token={TELEGRAM}",
        "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
        "Authorization: Bearer abcdefghijklmnop.qrstuvwxyz",
    ],
)
def test_a_secret_inside_a_line_is_redacted(line: str) -> None:
    cleaned = redact(line)
    assert "[REDACTED]" in cleaned
    assert TELEGRAM not in cleaned and "abcdefghijklmnopqrstuvwxyz0123456789" not in cleaned


def test_ordinary_numbers_and_times_are_kept() -> None:
    line = "session 42 at 12:30 used 1234 tokens"
    assert redact(line) == line
