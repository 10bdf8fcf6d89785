"""``hygieia doctor`` on the OpenAI-compatible API's keys: a weak key fails the check, never shown."""

from __future__ import annotations

from pathlib import Path

from gateway.cli.doctor import run_checks
from gateway.config import Settings

STRONG = "s" * 32


async def test_doctor_names_the_api_keys_and_where_the_api_listens(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=f"laptop={STRONG},ci={STRONG}x", api={"port": 9001})
    [api] = [c for c in await run_checks(settings, contact_endpoints=False) if c.name == "api"]
    assert api.status == "ok"
    assert api.detail == "2 key(s) (laptop, ci) at http://127.0.0.1:9001/v1"


async def test_doctor_fails_on_a_short_api_key_without_showing_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys="laptop=hunter2-short")
    [api] = [c for c in await run_checks(settings, contact_endpoints=False) if c.name == "api"]
    assert api.status == "fail" and "too short" in api.detail and "hunter2" not in api.detail


async def test_doctor_has_no_api_line_without_keys(tmp_path: Path) -> None:
    checks = await run_checks(Settings(data_dir=tmp_path), contact_endpoints=False)
    assert "api" not in [c.name for c in checks]
