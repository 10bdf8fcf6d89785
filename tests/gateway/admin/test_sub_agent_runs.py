"""Sub-agent runs on the admin session page: a chat's page lists the runs of its ``delegate`` calls,
each linked to its transcript, and a sub-agent's page links back to its chat."""

from __future__ import annotations

from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client
from tests.store.helpers import new_session


async def test_a_chat_page_lists_its_sub_agent_runs_linked_to_their_transcripts(store: Store) -> None:
    chat = await new_session(store)
    done = await store.open_delegation(chat, model="claude-haiku-5-5", system_prompt="You are a sub-agent.")
    await store.close_delegation(done, "timeout")
    running = await store.open_delegation(
        chat, model="claude-sonnet-5-5", system_prompt="You are a sub-agent."
    )
    async with admin_client(store) as client:
        page = (await client.get(f"/sessions/{chat}")).text
    assert "<h2>Sub-agent runs</h2>" in page
    table = page.split("<h2>Sub-agent runs</h2>")[1].split("</table>")[0]
    assert f'href="/sessions/{done}"' in table and f'href="/sessions/{running}"' in table
    assert "<td>timeout</td>" in table and "<td>running</td>" in table
    assert table.index(done) < table.index(running)


async def test_a_sub_agents_page_links_back_to_its_chat(store: Store) -> None:
    chat = await new_session(store)
    child = await store.open_delegation(chat, model="claude-haiku-5-5", system_prompt="You are a sub-agent.")
    async with admin_client(store) as client:
        page = (await client.get(f"/sessions/{child}")).text
    assert f'A sub-agent run of the chat session <a href="/sessions/{chat}">' in page
    assert "<h2>Sub-agent runs</h2>" not in page


async def test_a_chat_that_delegated_nothing_shows_no_runs(store: Store) -> None:
    chat = await new_session(store)
    async with admin_client(store) as client:
        page = (await client.get(f"/sessions/{chat}")).text
    assert "Sub-agent run" not in page
