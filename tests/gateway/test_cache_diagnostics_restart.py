"""The cache diagnostics chain survives a restart of the service: the first call after it names
the response the last call before it got (kept in SQL with the session's state)."""

from __future__ import annotations

from gateway.store.repository import Store
from tests.gateway.conftest import gateway_rig


async def test_the_first_call_after_a_restart_names_the_last_response_before_it(store: Store) -> None:
    async with gateway_rig(store) as before:
        await before.say("hello", message_id="before-1")
        await before.settle()
        await before.say("and again", message_id="before-2")
        await before.settle()
        first, second = before.responder.chat_bodies
        last_id = list(before.fake.diagnostics.kept)[-1]
    async with gateway_rig(store) as after:
        await after.say("after the restart", message_id="after-1")
        await after.settle()
        [resumed] = after.responder.chat_bodies

    assert first["diagnostics"] == {"previous_message_id": None}
    assert second["diagnostics"]["previous_message_id"] is not None
    assert resumed["diagnostics"] == {"previous_message_id": last_id}
    # This fake never saw that id (a new server): it says so, as the API would after its retention.
    assert after.fake.diagnostics.answered == ["previous_message_not_found"]
