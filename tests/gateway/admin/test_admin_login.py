"""The sign-in form: a browser without the cookie gets it instead of JSON; the token POSTed from this
origin signs in (cookie, redirect to the page asked for), a wrong one says so and counts toward the
throttle, a post from elsewhere is refused."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from gateway.admin.app import create_app
from gateway.admin.middleware import COOKIE, FailedLogins
from gateway.store.repository import Store
from tests.gateway.admin_support import TOKEN

ORIGIN = "http://admin.test"
BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
FROM_THE_FORM = {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}


@asynccontextmanager
async def browser(store: Store, throttle: FailedLogins | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A client that asks for pages as a browser does, signed in by nothing yet."""
    app = create_app(store, token=TOKEN, failed_logins=throttle)
    transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 40000))
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN, headers=BROWSER) as client:
        yield client


def hidden_next(page: str) -> str:
    found = re.search(r'<input type="hidden" name="next" value="([^"]*)">', page)
    assert found is not None, page
    return found.group(1).replace("&amp;", "&")


async def test_a_browser_without_the_cookie_gets_the_sign_in_form(store: Store) -> None:
    async with browser(store) as client:
        answer = await client.get("/")
    assert answer.status_code == 401 and answer.headers["content-type"].startswith("text/html")
    page = answer.text
    assert '<form class="login" method="post" action="/login">' in page
    assert '<input id="token" type="password" name="token"' in page
    assert "HYGIEIA_ADMIN_TOKEN" in page and hidden_next(page) == "/"
    assert "script-src" not in answer.headers["content-security-policy"]  # no script, as on every page


async def test_the_form_leads_to_the_page_that_was_asked_for(store: Store) -> None:
    async with browser(store) as client:
        page = (await client.get("/usage", params={"since": "2026-11-01", "until": "2026-11-02"})).text
    assert hidden_next(page) == "/usage?since=2026-11-01&until=2026-11-02"


async def test_a_program_without_the_token_still_gets_json(store: Store) -> None:
    async with browser(store) as client:
        answer = await client.get("/", headers={"Accept": "*/*"})
        api = await client.get("/api/sessions")  # the API answers JSON even to a browser
    assert answer.status_code == 401 and "token" in answer.json()["error"]
    assert api.status_code == 401 and "token" in api.json()["error"]


async def test_the_right_token_posted_signs_in_and_goes_to_the_page(store: Store) -> None:
    async with browser(store) as client:
        answer = await client.post(
            "/login", data={"token": f"  {TOKEN}\n", "next": "/usage?since=2026-11-01"}, headers=FROM_THE_FORM
        )
        assert answer.status_code == 303 and answer.headers["location"] == "/usage?since=2026-11-01"
        cookie = answer.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and TOKEN.lower() not in cookie
        sessions = await client.get("/")
        again = await client.get("/login")
    assert sessions.status_code == 200 and "Sessions" in sessions.text
    assert again.status_code == 303 and again.headers["location"] == "/"


async def test_a_wrong_token_posted_says_so_and_sets_no_cookie(store: Store) -> None:
    async with browser(store) as client:
        answer = await client.post(
            "/login", data={"token": "guess-guess-guess", "next": "/"}, headers=FROM_THE_FORM
        )
        assert answer.status_code == 401 and "set-cookie" not in answer.headers
        assert "That is not the admin token" in answer.text and "HYGIEIA_ADMIN_TOKEN" in answer.text
        assert COOKIE not in client.cookies
        assert (await client.get("/")).status_code == 401


async def test_an_empty_token_posted_asks_for_one_and_is_not_counted(store: Store) -> None:
    throttle = FailedLogins(max_failures=1, window_seconds=60)
    async with browser(store, throttle) as client:
        empty = await client.post("/login", data={"token": " ", "next": "/"}, headers=FROM_THE_FORM)
        wrong = await client.post("/login", data={"token": "wrong-wrong-wrong"}, headers=FROM_THE_FORM)
    assert empty.status_code == 400 and "Enter the admin token" in empty.text
    assert wrong.status_code == 429  # the first counted failure, with a limit of one


async def test_wrong_tokens_posted_are_throttled_like_other_attempts_but_the_right_one_gets_in(
    store: Store,
) -> None:
    throttle = FailedLogins(max_failures=3, window_seconds=60)
    async with browser(store, throttle) as client:
        await client.get("/api/sessions", headers={"Authorization": "Bearer wrong-bearer-token"})
        statuses = [
            (
                await client.post("/login", data={"token": f"guess-{n}-guess-guess"}, headers=FROM_THE_FORM)
            ).status_code
            for n in range(3)
        ]
        blocked = await client.post("/login", data={"token": "guess-again-guess"}, headers=FROM_THE_FORM)
        page = await client.get("/")
        right = await client.post("/login", data={"token": TOKEN}, headers=FROM_THE_FORM)
    assert statuses == [401, 429, 429]  # the bearer guess counted too: one throttle for every way in
    assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) > 0
    assert "Too many failed attempts" in blocked.text and "<form" in blocked.text
    assert page.status_code == 429 and "Too many failed attempts" in page.text and "<form" in page.text
    assert page.headers["content-type"].startswith("text/html") and int(page.headers["retry-after"]) > 0
    assert int(page.headers["content-length"]) == len(page.content)
    assert right.status_code == 303 and COOKIE in right.headers["set-cookie"]


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://admin.test:8080", "Sec-Fetch-Site": "same-site"},
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {},
    ],
    ids=["other-port", "cross-site", "other-origin", "null-origin", "neither-header"],
)
async def test_a_sign_in_post_from_another_origin_is_refused(store: Store, headers: dict[str, str]) -> None:
    async with browser(store) as client:
        answer = await client.post("/login", data={"token": TOKEN, "next": "/"}, headers=headers)
    assert answer.status_code == 403 and "set-cookie" not in answer.headers
    assert "origin" in answer.text.lower() or "sec-fetch-site" in answer.text.lower()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("//evil.example/x", "/x"),  # a host is dropped, its path kept
        ("/\\evil.example/x", "/evil.example/x"),
        ("/\t/evil.example", "/"),  # read as //evil.example, as a browser would
        ("https://evil.example/x?y=1", "/x?y=1"),
        ("", "/"),
        (f"/search?q=a&token={TOKEN}", "/search?q=a"),
    ],
)
async def test_where_the_form_leads_never_leaves_the_site(store: Store, given: str, expected: str) -> None:
    async with browser(store) as client:
        answer = await client.post("/login", data={"token": TOKEN, "next": given}, headers=FROM_THE_FORM)
    assert answer.status_code == 303 and answer.headers["location"] == expected


async def test_a_huge_sign_in_form_is_refused_without_reading_it_all(store: Store) -> None:
    async with browser(store) as client:
        answer = await client.post("/login", data={"token": "x" * 100_000}, headers=FROM_THE_FORM)
    assert answer.status_code == 400 and "too large" in answer.text
