"""It keeps holding: ``hygieia run`` as a child process, Telegram users talking to it, and the model API
failing about 30% of calls (429 with retry-after, 529, 500, timeouts, connection resets, a disconnect
mid-response). Every user message ends with exactly one reply or one clear error (the message it
quotes tells which), none is lost, none duplicated, no chat stalls. Replies stream (edits of one
message): a stream cut by a fault stays as a partial marked "interrupted", and the answer follows.
Reduced by default; full size with ``-m full``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import func, select

from gateway.outbound import failures
from gateway.outbound.streaming import INTERRUPTED_NOTE
from gateway.store.db import Database
from gateway.store.models import inbox
from tests.fakes.anthropic_faults import FAULTS, FaultyAnthropic
from tests.fakes.telegram import FakeTelegram, SentMessage
from tests.gateway.conftest import MODEL, ChatResponder
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

REPO = Path(__file__).resolve().parents[3]
FIRST_USER = 7001
CLEAR_ERRORS = {failures.GAVE_UP, failures.BROKEN, failures.TOO_LONG, failures.NO_ACCESS, failures.SET_ASIDE}
ANSWER_WITHIN = 120.0


@dataclass
class Outcome:
    messages: int = 0
    replies: int = 0
    errors: int = 0
    interrupted: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)


def quoting(telegram: FakeTelegram, chat: int, message_id: int) -> list[SentMessage]:
    """What the bot sent quoting one message: its reply or its error, and any stream cut short."""
    return [
        s
        for s in telegram.sent
        if s.chat_id == chat and (s.reply_parameters or {}).get("message_id") == message_id
    ]


def final(answer: SentMessage, text: str) -> bool:
    """A finished reply to ``text`` (the fake model answers ``reply: <text>``) or a clear error."""
    return answer.plain_text == f"reply: {text}" or answer.plain_text in CLEAR_ERRORS


def answers_to(telegram: FakeTelegram, chat: int, message_id: int, text: str) -> list[SentMessage]:
    return [s for s in quoting(telegram, chat, message_id) if final(s, text)]


async def converse(telegram: FakeTelegram, chat: int, count: int) -> list[tuple[int, str]]:
    """A user who sends the next message once the previous one is answered; (message id, text) each."""
    sent: list[tuple[int, str]] = []
    for i in range(count):
        text = f"chat {chat} message {i}"
        update = telegram.push_message(chat, text, user_id=chat)
        message_id = int(update["message"]["message_id"])
        sent.append((message_id, text))
        deadline = time.monotonic() + ANSWER_WITHIN
        while not answers_to(telegram, chat, message_id, text):
            if time.monotonic() > deadline:
                return sent  # stalled: counted as lost below
            await asyncio.sleep(0.05)
    return sent


def judge(telegram: FakeTelegram, conversations: dict[int, list[tuple[int, str]]]) -> Outcome:
    outcome = Outcome()
    for chat, sent in conversations.items():
        for message_id, text in sent:
            outcome.messages += 1
            answers = answers_to(telegram, chat, message_id, text)
            if not answers:
                outcome.lost.append(text)
            elif len(answers) > 1:
                outcome.duplicated.append(text)
            outcome.replies += sum(1 for a in answers if a.plain_text == f"reply: {text}")
            outcome.errors += sum(1 for a in answers if a.plain_text in CLEAR_ERRORS)
            for other in quoting(telegram, chat, message_id):
                if other.plain_text.endswith(INTERRUPTED_NOTE):
                    outcome.interrupted += 1
                elif not final(other, text):
                    outcome.unexpected.append(other.plain_text)
    return outcome


async def inbox_states(db_path: Path) -> dict[str, int]:
    db = Database(f"sqlite+aiosqlite:///{db_path}")
    await db.connect()
    try:
        async with db.engine.connect() as conn:
            rows = await conn.execute(select(inbox.c.status, func.count()).group_by(inbox.c.status))
            return {str(status): int(n) for status, n in rows}
    finally:
        await db.dispose()


async def run_with_faults(tmp_path: Path, *, chats: int, per_chat: int, seed: int) -> None:
    users = [FIRST_USER + i for i in range(chats)]
    async with (
        FakeTelegram() as telegram,
        FaultyAnthropic(rate=0.3, seed=seed, responder=ChatResponder()) as api,
    ):
        env = clean_env()
        env.update(
            {
                "TELEGRAM_BOT_TOKEN": telegram.token,
                "HYGIEIA_TELEGRAM_BASE_URL": telegram.root,
                "ANTHROPIC_API_KEY": "test",
                "ANTHROPIC_BASE_URL": api.base_url,
                "HYGIEIA_ALLOWED_USERS": ",".join(f"telegram:{u}" for u in users),
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
                "HYGIEIA_LLM__TIMEOUT_SECONDS": "1.5",
                # One SDK retry: two faults in a row fail the turn, and the gateway's own retry takes over.
                "HYGIEIA_LLM__MAX_RETRIES": "1",
                "HYGIEIA_LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(REPO),
            }
        )
        async with hygieia_run(env, tmp_path) as proc:
            talks = await asyncio.gather(*(converse(telegram, user, per_chat) for user in users))
            await asyncio.sleep(1.5)  # room for a late duplicate to show up
            stderr = await sigterm_and_wait(proc, timeout=60)
        outcome = judge(telegram, dict(zip(users, talks, strict=True)))
        notices = [s.plain_text for s in telegram.sent if not s.reply_parameters]
        injected = sum(api.injected.values())
        calls = injected + api.answered

    states = await inbox_states(tmp_path / "hygieia.db")
    print(
        f"\nfault injection: {outcome.messages} messages, {calls} model calls, {injected} injected faults "
        f"({injected / max(calls, 1):.0%}: {dict(api.injected)}), {outcome.replies} replies, "
        f"{outcome.errors} errors, {len(outcome.lost)} lost, {len(outcome.duplicated)} duplicated; "
        f"{outcome.interrupted} streams cut short and answered again, {len(notices)} overloaded notices"
    )
    assert proc.returncode == 0, stderr[-3000:]
    assert outcome.lost == [] and outcome.duplicated == [] and outcome.unexpected == []
    assert set(notices) <= {failures.OVERLOADED}, notices
    assert outcome.replies + outcome.errors == outcome.messages == chats * per_chat
    assert states == {"done": outcome.messages}, states
    assert set(api.injected) == set(FAULTS), api.injected  # every kind of fault was met
    assert 0.2 < injected / calls < 0.4  # the seeds give about 30%


async def test_every_message_ends_with_one_reply_or_one_error_while_the_api_fails_30_percent(
    tmp_path: Path,
) -> None:
    await run_with_faults(tmp_path, chats=3, per_chat=7, seed=26)


@pytest.mark.full
async def test_every_message_ends_with_one_reply_or_one_error_full(tmp_path: Path) -> None:
    await run_with_faults(tmp_path, chats=8, per_chat=25, seed=6)
