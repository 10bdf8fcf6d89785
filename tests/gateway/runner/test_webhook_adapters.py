"""Which adapters run when webhook routes are configured, and the refusals at startup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.errors import ConfigError
from gateway.cli.doctor import run_checks
from gateway.config import Settings
from gateway.runner.adapters import build_adapters, chats_on_this_terminal

ROUTE = {"secret_env": "HOOK_SECRET", "deliver_to": "telegram:42"}


class _Tty:
    def isatty(self) -> bool:
        return True


def settings_with(tmp_path: Path, **values: Any) -> Settings:
    return Settings(data_dir=tmp_path, api={"port": 0}, webhooks={"routes": {"gh": ROUTE}}, **values)


def test_routes_alone_run_the_webhooks_and_their_chats_platform_not_the_console(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "x")
    settings = settings_with(tmp_path, telegram_bot_token="1:a")
    names = [a.name for a in build_adapters(settings, None)]
    assert sorted(names) == ["telegram", "webhooks"]
    assert not chats_on_this_terminal(
        Settings(data_dir=tmp_path, webhooks={"routes": {"gh": ROUTE}}), None, _Tty(), _Tty()
    )


def test_platform_webhooks_brings_the_platform_its_routes_deliver_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "x")
    settings = settings_with(tmp_path, telegram_bot_token="1:a")
    assert [a.name for a in build_adapters(settings, ["webhooks"])] == ["webhooks", "telegram"]


def test_a_missing_secret_stops_the_start_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOOK_SECRET", raising=False)
    with pytest.raises(ConfigError, match="HOOK_SECRET is not set"):
        build_adapters(settings_with(tmp_path, telegram_bot_token="1:a"), ["webhooks"])


def test_a_route_to_a_platform_without_its_token_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "x")
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
        build_adapters(settings_with(tmp_path), ["webhooks"])


def test_platform_webhooks_without_routes_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no webhooks\.routes"):
        build_adapters(Settings(data_dir=tmp_path), ["webhooks"])


async def test_doctor_fails_on_a_missing_webhook_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOOK_SECRET", raising=False)
    checks = await run_checks(settings_with(tmp_path, telegram_bot_token="1:a"), contact_endpoints=False)
    [hooks] = [c for c in checks if c.name == "webhooks"]
    assert hooks.status == "fail" and "HOOK_SECRET" in hooks.detail


async def test_doctor_lists_the_routes_when_all_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", "x")
    checks = await run_checks(settings_with(tmp_path, telegram_bot_token="1:a"), contact_endpoints=False)
    [hooks] = [c for c in checks if c.name == "webhooks"]
    assert hooks.status == "ok" and "/hooks/" in hooks.detail


def test_a_worker_node_builds_no_webhooks_and_needs_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOOK_SECRET", raising=False)
    settings = settings_with(tmp_path, telegram_bot_token="1:a")
    assert [a.name for a in build_adapters(settings, ["webhooks"], "worker")] == ["telegram"]


async def test_the_api_and_the_webhooks_answer_on_one_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    from gateway.platforms.http_api.adapter import ApiAdapter

    monkeypatch.setenv("HOOK_SECRET", "x")
    key = "k" * 32
    settings = settings_with(tmp_path, telegram_bot_token="1:a", api_keys=f"me={key}")
    adapters = {a.name: a for a in build_adapters(settings, ["api", "webhooks"])}
    api = adapters["api"]
    assert isinstance(api, ApiAdapter)
    await api.door.open()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api.door.port}") as client:
            models = await client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
            unsigned = await client.post("/hooks/gh", content=b"{}")
    finally:
        await api.door.close()
    assert models.status_code == 200 and [m["id"] for m in models.json()["data"]] == ["hygieia"]
    assert unsigned.status_code == 401


def test_the_api_is_refused_on_a_node_that_serves_no_turns(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=f"me={'k' * 32}", api={"port": 0})
    with pytest.raises(ConfigError, match="role all, not intake"):
        build_adapters(settings, ["api"], "intake")


def test_keys_alone_start_no_api_on_a_worker_node(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=f"me={'k' * 32}", telegram_bot_token="1:a")
    assert [a.name for a in build_adapters(settings, None, "worker")] == ["telegram"]
    assert sorted(a.name for a in build_adapters(settings, None, "all")) == ["api", "telegram"]
