"""``/status`` shows how much of the chat's prompt was read from the cache."""

from __future__ import annotations

from gateway.store.repository import Store
from tests.gateway.conftest import gateway_rig


async def test_status_shows_the_chat_s_cache_read_share(store: Store) -> None:
    async with gateway_rig(store) as rig:
        await rig.say("hello " + "words " * 1500)  # past the smallest cacheable prefix: it is cached
        await rig.settle()
        await rig.say("and again")
        await rig.settle()
        await rig.say("/status")
        await rig.settle()
        usage = await store.usage_summary(await rig.session_id())

    prompt = usage.input + usage.cache_write + usage.cache_read
    assert usage.cache_read > 0
    assert (
        f"Cache read share: {100 * usage.cache_read / prompt:.0f}% of {prompt:,} prompt tokens"
        in (rig.adapter.texts[-1])
    )


async def test_status_before_any_model_call_says_there_is_no_share_yet(store: Store) -> None:
    async with gateway_rig(store) as rig:
        await rig.say("/status")
        await rig.settle()

    assert "Cache read share: no model calls yet" in rig.adapter.texts[-1]
