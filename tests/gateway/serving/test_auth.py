"""Authorization: default deny, the console operator, one polite refusal an hour, only an audit line."""

from __future__ import annotations

from sqlalchemy import func, select

from gateway.serving.auth import REFUSAL_TEXT, Authorizer
from gateway.store.models import audit, inbox, messages, sessions
from gateway.store.repository import Store
from tests.gateway.conftest import gateway_rig, make_settings


def test_default_deny() -> None:
    auth = Authorizer(make_settings(allow_all_users=False))
    assert not auth.is_allowed("telegram", "42")


def test_listed_users_are_allowed_on_their_platform_only() -> None:
    auth = Authorizer(make_settings(allow_all_users=False, allowed_users=["telegram:42"]))
    assert auth.is_allowed("telegram", "42")
    assert not auth.is_allowed("discord", "42")


def test_the_console_operator_is_always_allowed_and_admin() -> None:
    auth = Authorizer(make_settings(allow_all_users=False))
    assert auth.is_allowed("console", "alice") and auth.is_admin("console", "alice")
    assert not auth.is_admin("telegram", "42")


def test_opening_the_bot_to_everyone_allows_any_user_but_makes_no_admin() -> None:
    auth = Authorizer(make_settings(allow_all_users=True))
    assert auth.is_allowed("discord", "7") and not auth.is_admin("discord", "7")


def test_listed_admins_are_admins_on_their_platform_only() -> None:
    auth = Authorizer(make_settings(admin_users=["telegram:1"]))
    assert auth.is_admin("telegram", "1") and not auth.is_admin("discord", "1")


def test_a_refusal_is_sent_at_most_once_an_hour() -> None:
    now = [0.0]
    auth = Authorizer(make_settings(allow_all_users=False), clock=lambda: now[0])
    assert auth.should_notify_refusal("telegram", "9")
    now[0] = 3599.0
    assert not auth.should_notify_refusal("telegram", "9")
    now[0] = 3600.0
    assert auth.should_notify_refusal("telegram", "9")


async def _count(store: Store, table: object) -> int:
    async with store.db.transaction(write=False) as s:
        return int(await s.scalar(select(func.count()).select_from(table)) or 0)  # type: ignore[arg-type]


async def test_a_stranger_gets_one_polite_sentence_and_nothing_is_stored_but_an_audit_line(
    store: Store,
) -> None:
    async with gateway_rig(store, allow_all_users=False) as rig:
        for _ in range(3):
            await rig.say("let me in", user_id="stranger")
        await rig.settle()

        assert rig.adapter.texts == [REFUSAL_TEXT]
        assert rig.fake.requests == []
        assert await _count(store, inbox) == 0
        assert await _count(store, messages) == 0
        assert await _count(store, sessions) == 0
        assert await _count(store, audit) == 1
