"""``llm.fallback``: the API's server-side fallback answers a refused request on another model."""

from __future__ import annotations

import httpx
import pytest

from agent.settings import LLMSettings
from agent.tokens import cost_usd
from tests.agent.loop_support import MODEL, rig
from tests.fakes.anthropic import FALLBACK_BETA, FakeAnthropic, refusal_reply, text_reply


async def test_a_refused_request_answered_by_the_fallback_model_is_recorded_and_priced_as_that_model() -> (
    None
):
    async with rig(llm=LLMSettings(max_retries=0, fallback="default")) as r:
        r.fake.fallback_model = "claude-opus-4-8"
        r.script.add(refusal_reply("", category="bio"), text_reply("the fallback's answer"))
        result = await r.turn("a borderline question")

        [request] = r.fake.requests
        [record] = r.store.usage[r.session.id]

    assert result.final_text == "the fallback's answer" and result.refusal is None
    assert request.json is not None and request.json["fallbacks"] == "default"
    assert FALLBACK_BETA in request.headers["anthropic-beta"]
    assert (record.model, MODEL) == ("claude-opus-4-8", "claude-sonnet-4-6")
    assert record.cost_usd == pytest.approx(cost_usd("claude-opus-4-8", record.usage))
    assert record.cost_usd != pytest.approx(cost_usd(MODEL, record.usage))


async def test_without_fallback_no_fallbacks_field_nor_beta_is_sent_and_a_refusal_ends_the_turn() -> None:
    async with rig() as r:
        r.script.add(refusal_reply("half an ans", category="cyber"))
        result = await r.turn("a borderline question")
        [request] = r.fake.requests
        [record] = r.store.usage[r.session.id]

    assert (result.stopped, result.refusal) == ("refusal", "cyber")
    assert request.json is not None and "fallbacks" not in request.json
    assert FALLBACK_BETA not in request.headers.get("anthropic-beta", "")
    assert record.model == MODEL


async def test_the_fake_refuses_fallbacks_without_the_beta_header_like_the_api() -> None:
    body = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    async with FakeAnthropic() as fake, httpx.AsyncClient(base_url=fake.base_url) as client:
        headers = {"x-api-key": "test", "anthropic-version": "2023-06-01"}
        refused = await client.post("/v1/messages", json={**body, "fallbacks": "default"}, headers=headers)
        beta = {**headers, "anthropic-beta": FALLBACK_BETA}
        accepted = await client.post("/v1/messages", json={**body, "fallbacks": "default"}, headers=beta)

    assert refused.status_code == 400 and "fallbacks" in refused.json()["error"]["message"]
    assert accepted.status_code == 200
