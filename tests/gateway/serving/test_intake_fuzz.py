"""Intake under fuzzed messages, on every engine: any text (NUL, controls, lone surrogates, RTL, huge,
command-like), any text files; each addressed message is answered exactly once (the reply quotes it),
every inbox item ends done, and nothing is left pending."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.platforms.base import Attachment, InboundMessage
from gateway.store.repository import Store
from tests.gateway.conftest import gateway_rig

TEXT = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=100),
    st.sampled_from(
        ["", " ", "/help", "/context", "/usage", "/status", "/nope", "/compact now", "\u202e", "\x00"]
    ),
    st.builds(lambda s, n: s * n, st.sampled_from(["`", "a ", "🙂", "\ud800", "ש"]), st.integers(1, 50_000)),
)
FILES = st.lists(
    st.builds(lambda name, text: Attachment("document", file_name=name, size=len(text), text=text),
              st.text(max_size=20), TEXT),
    max_size=3,
)  # fmt: skip
MESSAGES = st.lists(st.tuples(TEXT, FILES, st.booleans()), min_size=1, max_size=4)
_ids = itertools.count(1)


async def fuzz(store: Store, messages: list[tuple[str, list[Attachment], bool]]) -> None:
    async with gateway_rig(store, sessions={"group_mode": "shared"}) as rig:
        for text, files, addressed in messages:
            message_id = f"fz-{next(_ids)}"
            await rig.gateway.intake(
                InboundMessage(
                    platform="test",
                    chat_id="chat-1",
                    user_id="u1",
                    text=text,
                    platform_message_id=message_id,
                    chat_type="group",
                    addressed=addressed,
                    attachments=tuple(files),
                )
            )
            await rig.settle()
            quoting = [s for s in rig.adapter.sent if s.target.reply_to_message_id == message_id]
            expected = 1 if addressed and (text.strip() or files) else 0
            assert len(quoting) <= 1, [s.text[:80] for s in quoting]
            if addressed:
                assert (
                    len(quoting) == 1
                    or expected == 0
                    or any(s.target.reply_to_message_id is None for s in rig.adapter.sent)
                )
        for item_id in range(1, len(messages) + 1):
            item = await store.inbox_get(item_id)
            assert item.status in ("done", "ignored"), (item.status, item.error)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(messages=MESSAGES)
async def test_fuzzed_messages_are_each_answered_once_and_nothing_stays_pending(
    store: Store, messages: list[tuple[str, list[Attachment], bool]]
) -> None:
    await fuzz(store, messages)


@pytest.mark.full
@pytest.mark.timeout(1800)
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(messages=MESSAGES)
async def test_fuzzed_messages_are_each_answered_once_full(
    store: Store, messages: list[tuple[str, list[Attachment], bool]]
) -> None:
    await fuzz(store, messages)
