"""Structured logs: JSON lines off a terminal, and never a secret."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config import Settings
from gateway.logging_setup import configure_logging

API_KEY = "sk-ant-api03-" + "A" * 40
BOT_TOKEN = "123456789:" + "B" * 35


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def _configure(stream: io.StringIO, **overrides: object) -> None:
    settings = Settings(anthropic_api_key=API_KEY, telegram_bot_token=BOT_TOKEN, **overrides)  # type: ignore[arg-type]
    configure_logging(settings, stream=stream, log_file=False)


def test_off_a_terminal_each_record_is_one_json_object_with_its_fields(restore_root: None) -> None:
    stream = io.StringIO()
    _configure(stream)
    logging.getLogger("gateway.test").info(
        "compacted %d messages", 12, extra={"session": "s1", "trigger": "hygiene"}
    )

    record = json.loads(stream.getvalue().splitlines()[-1])
    assert record["msg"] == "compacted 12 messages"
    assert record["session"] == "s1" and record["trigger"] == "hygiene" and record["level"] == "INFO"


def test_configured_secrets_and_key_shaped_text_never_reach_the_log(restore_root: None) -> None:
    stream = io.StringIO()
    _configure(stream)
    log = logging.getLogger("gateway.test")
    log.warning("calling https://api.telegram.org/bot%s/getMe", BOT_TOKEN)
    log.error("auth failed for %s", API_KEY, extra={"header": f"Bearer {API_KEY}"})
    log.info("db postgresql+psycopg://app:hunter2secret@db:5432/h")
    try:
        raise RuntimeError(f"boom {API_KEY}")
    except RuntimeError:
        log.exception("with a traceback")

    text = stream.getvalue()
    assert API_KEY not in text and BOT_TOKEN not in text and "hunter2secret" not in text
    assert text.count("[REDACTED]") >= 4


def test_a_configured_secret_inside_nested_log_fields_is_masked(restore_root: None) -> None:
    stream = io.StringIO()
    _configure(stream)
    nested = {"request": {"headers": [("x-key", API_KEY)], "url": f"/bot{BOT_TOKEN}/getMe"}, API_KEY: 1}
    logging.getLogger("gateway.test").warning("call failed", extra={"call": nested, "tries": [BOT_TOKEN]})

    line = stream.getvalue().splitlines()[-1]
    record = json.loads(line)
    assert API_KEY not in line and BOT_TOKEN not in line
    assert record["call"]["request"]["url"] == "/bot[REDACTED]/getMe"
    assert record["tries"] == ["[REDACTED]"]


def test_on_a_terminal_logs_are_human_text(restore_root: None) -> None:
    stream = io.StringIO()
    _configure(stream, log_format="text")
    logging.getLogger("gateway.test").info("hello")
    assert "hello" in stream.getvalue() and not stream.getvalue().lstrip().startswith("{")


def test_in_chat_mode_only_warnings_reach_the_terminal_each_as_one_line(
    restore_root: None, tmp_path: Path
) -> None:
    stream = io.StringIO()
    settings = Settings(data_dir=tmp_path)
    configure_logging(settings, stream=stream, chat=True)
    log = logging.getLogger("gateway.test")
    log.info("routine detail")
    try:
        raise RuntimeError("disk on fire")
    except RuntimeError:
        log.exception("delivery round failed")

    [line] = stream.getvalue().splitlines()
    assert line.startswith("error: delivery round failed (details in ") and line.endswith("hygieia.log)")
    records = [json.loads(x) for x in (tmp_path / "logs" / "hygieia.log").read_text().splitlines()]
    assert [r["msg"] for r in records] == ["routine detail", "delivery round failed"]
    assert "disk on fire" in records[1]["exc"]
