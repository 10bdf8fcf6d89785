"""The admin pages in a real browser: Debian's Chromium, headless, driven over the DevTools protocol.

An operator's day: log in with the token, find sessions, search, open a hit in its context,
expand the archive, compact a session behind its confirmation, erase a user, read the audit.
Screenshots go to tests/artifacts/browser/ (not committed). Without Chromium these tests skip
with one loud line (scripts/test installs it where apt-get can).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.types import ChatMessage, Usage, UsageRecord
from gateway.admin.app import create_app
from gateway.admin.server import AdminServer
from gateway.store.repository import Store
from tests.gateway.admin.test_admin_actions_api import long_session
from tests.gateway.admin_support import TOKEN, seed, summarizer
from tests.gateway.chromium import Browser, Page, chromium_path
from tests.store.engines import only

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"

pytestmark = [
    pytest.mark.skipif(
        chromium_path() is None,
        reason="BROWSER TESTS SKIPPED: Chromium not found (apt-get install chromium); the admin pages "
        "were NOT tested in a browser",
    ),
    only("sqlite"),  # the pages' SQL runs on both engines in the API and page tests
]


@pytest.fixture
async def site(store: Store, tmp_path: Path) -> AsyncIterator[tuple[str, Page, Store]]:
    """The admin app served on a free port (with a compressor), and a logged-out browser tab."""
    async with summarizer() as engine:
        app = create_app(store, token=TOKEN, engine=engine, context_window=lambda _model: 8000)
        async with (
            AdminServer(app, host="127.0.0.1", port=0) as server,
            Browser.launch(tmp_path / "profile") as browser,
        ):
            yield f"http://127.0.0.1:{server.port}", browser.page, store


async def login(base: str, page: Page) -> None:
    await page.goto(f"{base}/?token={TOKEN}")
    assert await page.evaluate("location.search") == ""  # the token left the address bar


async def test_log_in_find_search_and_open_a_hit_in_its_archived_context(
    site: tuple[str, Page, Store],
) -> None:
    base, page, store = site
    seeded = await seed(store)
    for day in range(14):  # two weeks of calls, the cache warming up
        usage = Usage(2000 - 120 * day, 400, 300, 1500 + 900 * day)
        at = datetime(2026, 11, 10 + day, 12, tzinfo=UTC)
        await store.record_usage(
            seeded.session_id, UsageRecord("m", "chat", usage, 0.05 + 0.01 * (day % 5)), at=at
        )
    await page.goto(base + "/")
    assert await page.evaluate("document.querySelector('form.login') !== null")  # the sign-in form
    await login(base, page)
    assert "telegram:100" in await page.text("table.sessions")
    await page.screenshot(ARTIFACTS / "sessions.png")

    await page.type_into("header input[name=q]", '"message 3"')
    await page.click("header form button")
    assert await page.evaluate("location.pathname") == "/search"
    hit = await page.text("li.hit")
    assert "telegram:100" in hit and "telegram" in hit and "archived" in hit
    await page.screenshot(ARTIFACTS / "search.png")

    await page.click("li.hit a")
    target = await page.evaluate(
        "(() => { const m = document.querySelector('.msg.target'); const r = m.getBoundingClientRect();"
        " return {open: m.closest('details').open, text: m.innerText, visible: r.height > 0 && r.top >= 0"
        " && r.top < innerHeight, hash: location.hash}; })()"
    )
    assert target["open"] and target["visible"] and "message 3" in target["text"]
    assert target["hash"].startswith("#m")
    await page.screenshot(ARTIFACTS / "hit-in-context.png")

    closed = "details.archived:not([open]) > summary"
    await page.click(closed, navigates=False)
    assert await page.evaluate("document.querySelectorAll('details.archived:not([open])').length") == 0
    shown = await page.evaluate(
        "[...document.querySelectorAll('details.archived .msg')]"
        ".every(m => m.getBoundingClientRect().height > 0)"
    )
    assert shown
    await page.screenshot(ARTIFACTS / "archive-expanded.png")

    await page.goto(base + "/usage")
    assert "$1.02" in await page.text(".cards") and await page.evaluate(
        "!!document.querySelector('svg.usage-chart')"
    )
    await page.screenshot(ARTIFACTS / "usage.png")


async def test_sign_in_with_the_form_after_a_wrong_token_lands_on_the_page_asked_for(
    site: tuple[str, Page, Store],
) -> None:
    base, page, store = site
    await seed(store)
    await page.goto(base + "/usage?group=day")
    # Ready to paste into: autofocus applies once the page has rendered, later on a busy machine.
    for _ in range(50):
        if await page.evaluate("document.activeElement.name") == "token":
            break
        await asyncio.sleep(0.1)
    assert await page.evaluate("document.activeElement.name") == "token"
    assert await page.evaluate("document.querySelector('input[name=token]').type") == "password"
    await page.screenshot(ARTIFACTS / "login.png")

    await page.type_into("input[name=token]", "not-the-admin-token-at-all")
    await page.click("form.login button")
    assert "That is not the admin token" in await page.text("[role=alert]")
    await page.screenshot(ARTIFACTS / "login-wrong-token.png")

    await page.type_into("input[name=token]", TOKEN)
    await page.click("form.login button")
    assert await page.evaluate("location.pathname + location.search") == "/usage?group=day"
    assert await page.evaluate("document.querySelector('svg.usage-chart') !== null")
    await page.goto(base + "/")
    assert "telegram:100" in await page.text("table.sessions")  # the cookie serves every page


async def test_compact_now_behind_its_confirmation_then_read_the_audit(site: tuple[str, Page, Store]) -> None:
    base, page, store = site
    sid = await long_session(store)
    await login(base, page)
    await page.goto(f"{base}/sessions/{sid}")
    await page.click(f'a[href="/sessions/{sid}/compact"]')
    assert "Compact now" in await page.text("h1")
    await page.type_into("input[name=focus]", "the garden")
    await page.type_into("input[name=by]", "carol")
    await page.screenshot(ARTIFACTS / "confirm-compact.png")
    await page.click("form.confirm button[name=confirm]")
    assert await page.evaluate("location.pathname") == f"/sessions/{sid}"
    notice = await page.text(".notice")
    assert notice.startswith("Compacted ") and "messages" in notice
    assert await page.evaluate("document.querySelectorAll('.msg.summary').length") == 1
    await page.screenshot(ARTIFACTS / "compacted.png")
    [record] = await store.list_compactions(sid)
    assert record.trigger == "manual" and record.focus == "the garden"

    await page.click('header a[href="/audit"]')
    row = await page.text("tr.audit")
    assert "admin_compact" in row and "carol via page from 127.0.0.1" in row and "archived" in row
    await page.screenshot(ARTIFACTS / "audit.png")


async def test_erase_a_user_behind_typing_the_code_the_page_shows(site: tuple[str, Page, Store]) -> None:
    base, page, store = site
    sid = await long_session(store, 4)
    await store.append_message(sid, ChatMessage.user("please forget me", author_id="u9", author_name="Uma"))
    await login(base, page)
    await page.goto(f"{base}/erase")
    await page.type_into("input[name=platform]", "telegram")
    await page.type_into("input[name=user]", "u9")
    await page.click("form.filters button")
    assert "deletes 1 messages" in await page.text("main")
    await page.type_into("input[name=typed]", await page.text("form.confirm code"))
    await page.screenshot(ARTIFACTS / "confirm-erase.png")
    await page.click("form.confirm button[name=confirm]")
    assert await page.evaluate("location.pathname") == "/audit"
    assert (await page.text(".notice")).startswith("Erased 1 messages of telegram:u9")
    assert all(m.author_id != "u9" for m in await store.load_active(sid))


async def test_set_a_chats_override_on_the_page_then_clear_it(site: tuple[str, Page, Store]) -> None:
    base, page, store = site
    await login(base, page)
    await page.click('header a[href="/overrides"]')
    assert "Per-chat overrides" in await page.text("h1")
    assert "No admin-set overrides" in await page.text("main")
    await page.type_into("form.set-override input[name=platform]", "telegram")
    await page.type_into("form.set-override input[name=chat]", "-100200")
    await page.type_into("form.set-override input[name=model]", "claude-haiku-4-5")
    await page.type_into("form.set-override input[name=budget_tokens]", "60000")
    await page.type_into("form.set-override textarea[name=system_prompt]", "You are a pirate.")
    await page.type_into("form.set-override input[name=by]", "dana")
    await page.screenshot(ARTIFACTS / "set-override.png")
    await page.click("form.set-override button[name=confirm]")
    assert await page.evaluate("location.pathname") == "/overrides"
    assert (await page.text(".notice")).startswith("Set the override of telegram:-100200")
    row = await page.text("table.admin-overrides tr.override")
    assert "-100200" in row and "claude-haiku-4-5" in row and "60,000" in row and "You are a pirate." in row
    assert "dana via page from 127.0.0.1" in row
    await page.screenshot(ARTIFACTS / "override-set.png")
    [kept] = await store.admin_overrides_for("telegram", "-100200")
    assert (kept.model, kept.budget_tokens, kept.system_prompt) == (
        "claude-haiku-4-5",
        60_000,
        "You are a pirate.",
    )

    # An unknown model is refused in one line, and nothing changes.
    await page.type_into("form.set-override input[name=platform]", "telegram")
    await page.type_into("form.set-override input[name=chat]", "-100200")
    await page.type_into("form.set-override input[name=model]", "claude-nonesuch")
    await page.click("form.set-override button[name=confirm]")
    assert "unknown model 'claude-nonesuch'" in await page.text("main")
    assert (await store.admin_overrides_for("telegram", "-100200"))[0].model == "claude-haiku-4-5"

    await page.goto(base + "/overrides")
    await page.click("table.admin-overrides form.clear button")
    assert (await page.text(".notice")).startswith("Cleared the override of telegram:-100200")
    assert await store.admin_overrides_for("telegram", "-100200") == []
    await page.click('header a[href="/audit"]')
    events = await page.evaluate("[...document.querySelectorAll('tr.audit')].map(r => r.cells[1].innerText)")
    assert events == ["admin_override_clear", "admin_override_set"]
