"""The same size caps for every platform, and whatever is accepted is stored whole and answered, on both
engines: a message over a megabyte (text and text files) included."""

from __future__ import annotations

from gateway.platforms.base import Attachment, InboundMessage
from gateway.store.repository import Store
from tests.gateway.conftest import gateway_rig

MEGABYTE_OF_TEXT = "".join(f"sentence number {i} of a very long paste. " for i in range(30_000))


async def test_a_message_over_a_megabyte_is_accepted_stored_and_answered(store: Store) -> None:
    assert len(MEGABYTE_OF_TEXT.encode()) > 1_000_000
    files = tuple(
        Attachment("document", file_name=f"log{i}.txt", size=len(MEGABYTE_OF_TEXT), text=MEGABYTE_OF_TEXT)
        for i in range(3)
    )
    async with gateway_rig(store) as rig:
        await rig.gateway.intake(
            InboundMessage(
                platform="test",
                chat_id="chat-1",
                user_id="u1",
                user_name="Ann",
                text=MEGABYTE_OF_TEXT,
                platform_message_id="huge-1",
                attachments=files,
            )
        )
        await rig.settle()
        caps = rig.settings.sessions
        item = await store.inbox_get(1)
        [user, answer] = await store.load_active(await rig.session_id())

    assert item.status == "done"
    assert answer.role == "assistant" and any(t.startswith("reply:") for t in rig.adapter.texts)
    assert any("too long for me to read in one go" in t for t in rig.adapter.texts)
    kept = len(item.payload["text"]) + sum(len(f["text"] or "") for f in item.payload["attachments"])
    assert kept == caps.max_inbound_total_chars
    assert item.payload["text"] in user.text  # stored whole: what was accepted is all there
    assert "kept the first" in user.text and "reached its size limit" in user.text
