"""Per-chat overrides set by an admin: list, set, clear through the API and the page; validated
(an unknown model is a 400 that says so), audited, and refused from another origin."""

from __future__ import annotations

import httpx

from gateway.admin.app import create_app
from gateway.config import ChatOverride
from gateway.store.repository import Store
from tests.gateway.admin.test_admin_actions_api import audit_entries
from tests.gateway.admin.test_admin_csrf import ORIGIN, SAME_SITE, browser
from tests.gateway.admin_support import AUTH, TOKEN, XSS, admin_client

PIRATE = "You are a pirate. Answer like one."


async def test_set_list_and_clear_an_override_each_audited(store: Store) -> None:
    async with admin_client(store) as client:
        set_ = await client.post(
            "/api/overrides",
            json={
                "platform": "telegram",
                "chat": "-1001",
                "system_prompt": PIRATE,
                "model": "claude-haiku-4-5",
                "budget_tokens": 60_000,
                "by": "dana",
            },
        )
        assert set_.status_code == 200, set_.text
        assert set_.json()["message"].startswith("Set the override of telegram:-1001: system prompt")
        assert "next session (/new)" in set_.json()["message"]
        listed = (await client.get("/api/overrides")).json()
        [entry] = listed["admin"]
        assert (entry["chat"], entry["model"], entry["budget_tokens"], entry["thread"]) == (
            "-1001",
            "claude-haiku-4-5",
            60_000,
            None,
        )
        assert entry["updated_by"].startswith("dana via api from ")
        cleared = await client.post("/api/overrides/clear", json={"platform": "telegram", "chat": "-1001"})
        assert cleared.status_code == 200, cleared.text
        assert (await client.get("/api/overrides")).json()["admin"] == []
        entries = await audit_entries(client)
    assert [e["event"] for e in entries] == ["admin_override_clear", "admin_override_set"]
    assert "model claude-haiku-4-5" in str(entries[1]["detail"])
    assert entries[1]["platform"] == "telegram"
    assert await store.admin_overrides_for("telegram", "-1001") == []


async def test_setting_again_replaces_and_the_audit_keeps_what_it_was(store: Store) -> None:
    async with admin_client(store) as client:
        for model in ("claude-haiku-4-5", "claude-sonnet-4-6"):
            answer = await client.post(
                "/api/overrides", json={"platform": "discord", "chat": "55", "thread": "9", "model": model}
            )
            assert answer.status_code == 200, answer.text
        [latest, _] = await audit_entries(client)
    [row] = await store.admin_overrides_for("discord", "55")
    assert (row.thread, row.model) == ("9", "claude-sonnet-4-6")
    assert str(latest["detail"]).startswith("Replaced the override of discord:55:thread:9")
    assert "Before: model claude-haiku-4-5" in str(latest["detail"])


async def test_an_unknown_model_is_a_clear_400_and_nothing_is_kept(store: Store) -> None:
    async with admin_client(store) as client:
        for field in ("model", "summary_model"):
            answer = await client.post(
                "/api/overrides", json={"platform": "telegram", "chat": "1", field: "claude-nonesuch-9"}
            )
            assert answer.status_code == 400
            error = answer.json()["error"]
            assert error.startswith(f"{field}: unknown model 'claude-nonesuch-9'; known: claude-opus-5-5")
        assert await audit_entries(client) == []
    assert await store.list_admin_overrides() == []


async def test_a_misspelt_model_is_refused_with_the_closest_name(store: Store) -> None:
    async with admin_client(store) as client:
        answer = await client.post(
            "/api/overrides", json={"platform": "telegram", "chat": "1", "model": "claude-sonet-5-5"}
        )
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(
        "model: unknown model 'claude-sonet-5-5' (did you mean claude-sonnet-5-5?); known: "
    )


async def test_other_bad_values_are_400_naming_the_field(store: Store) -> None:
    cases = [
        ({"platform": "telegram", "chat": "1"}, "set at least one of"),
        ({"platform": "telegram", "chat": "1", "budget_tokens": 10}, "budget_tokens"),
        ({"platform": "tele:gram", "chat": "1", "model": "claude-haiku-4-5"}, "platform"),
        ({"platform": "telegram", "chat": " ", "model": "claude-haiku-4-5"}, "chat"),
        ({"platform": "telegram", "chat": "1", "colour": "red"}, "colour"),
    ]
    async with admin_client(store) as client:
        for body, named in cases:
            answer = await client.post("/api/overrides", json=body)
            assert answer.status_code == 400, (body, answer.text)
            assert named in answer.json()["error"], (body, answer.json())
        missing = await client.post("/api/overrides/clear", json={"platform": "telegram", "chat": "404"})
    assert missing.status_code == 404 and "no admin-set override" in missing.json()["error"]
    assert await store.list_admin_overrides() == []


async def test_a_budget_past_what_a_column_holds_is_a_400_not_a_500(store: Store) -> None:
    async with admin_client(store) as client:
        for budget in (2**63, 2**31, -(2**63)):
            body = {"platform": "telegram", "chat": "1", "budget_tokens": budget}
            answer = await client.post("/api/overrides", json=body)
            assert answer.status_code == 400, (budget, answer.text)
            assert "budget_tokens" in answer.json()["error"]
    assert await store.list_admin_overrides() == []


def test_every_integer_of_a_chat_override_is_bounded() -> None:
    for name, info in ChatOverride.model_fields.items():
        if "int" in str(info.annotation):
            bounds = {type(m).__name__ for m in info.metadata}
            assert {"Ge", "Le"} <= bounds, name


async def test_a_model_named_under_models_in_the_config_is_accepted(store: Store) -> None:
    app = create_app(store, token=TOKEN, known_model=lambda model: model == "my-proxy-model")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://admin.test", headers=AUTH
    ) as client:
        ok = await client.post(
            "/api/overrides", json={"platform": "p", "chat": "c", "model": "my-proxy-model"}
        )
        refused = await client.post("/api/overrides", json={"platform": "p", "chat": "c", "model": "other"})
    assert ok.status_code == 200 and refused.status_code == 400


async def test_the_page_sets_and_clears_from_its_own_origin_only(store: Store) -> None:
    form = {"platform": "telegram", "chat": "7", "model": "claude-haiku-4-5", "by": "erin", "confirm": "yes"}
    async with browser(store) as client:
        foreign = await client.post("/overrides", data=form, headers=SAME_SITE)
        assert foreign.status_code == 403 and await store.list_admin_overrides() == []
        own = {"Origin": ORIGIN}
        done = await client.post("/overrides", data={**form, "system_prompt": XSS}, headers=own)
        assert done.status_code == 303 and done.headers["location"].startswith("/overrides?done=")
        page = await client.get(done.headers["location"])
        assert "Set the override of telegram:7" in page.text and XSS not in page.text
        clear = {"platform": "telegram", "chat": "7", "thread": "", "confirm": "yes"}
        assert (await client.post("/overrides/clear", data=clear, headers=SAME_SITE)).status_code == 403
        assert len(await store.list_admin_overrides()) == 1
        cleared = await client.post("/overrides/clear", data=clear, headers=own)
        assert cleared.status_code == 303
        assert "Cleared the override of telegram:7" in (await client.get(cleared.headers["location"])).text
    assert await store.list_admin_overrides() == []


async def test_the_page_lists_the_configs_entries_beside_the_admins(store: Store) -> None:
    config = [ChatOverride(platform="telegram", chat="-5", system_prompt="config persona")]
    app = create_app(store, token=TOKEN, config_overrides=config)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://admin.test", headers=AUTH
    ) as client:
        page = await client.get("/overrides")
        listed = (await client.get("/api/overrides")).json()
    assert "config persona" in page.text and "No admin-set overrides" in page.text
    assert listed["config"][0]["source"] == "config" and listed["config"][0]["chat"] == "-5"
