"""The models: section, the context budget and the default model, as a deployer sets them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.settings import CompressionSettings
from agent.tokens import model_info
from agent.types import AgentSession
from gateway.cli.doctor import run_checks
from gateway.config import load_settings
from gateway.runner import budget_for, context_window_for, model_info_for
from gateway.serving.commands import budget_line


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("HYGIEIA_") or name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_the_default_model_is_a_current_one() -> None:
    settings = load_settings()
    assert settings.model == "claude-sonnet-5-5"
    assert model_info(settings.model).known and model_info(settings.summary_model).known
    assert context_window_for(settings, settings.model) == 1_000_000


def test_the_default_budget_is_200k_of_a_1m_window() -> None:
    settings = load_settings()
    assert settings.compression.budget_tokens == 200_000
    assert budget_for(settings, settings.model) == 200_000


def test_a_null_budget_is_the_models_window(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "hygieia.yaml"
    config.write_text("compression:\n  budget_tokens: null\n")
    monkeypatch.setenv("HYGIEIA_CONFIG", str(config))
    assert budget_for(load_settings(), "claude-sonnet-5-5") is None


def test_a_models_entry_in_yaml_adds_a_model_and_overrides_its_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "hygieia.yaml"
    config.write_text(
        "model: acme-large-2\n"
        "models:\n"
        "  acme-large:\n"
        "    context_window: 500000\n"
        "    max_output: 16000\n"
        "    input_price: 1.0\n"
        "    output_price: 4.0\n"
        "    min_cache_prefix: 2048\n"
        "    budget_tokens: 300000\n"
        "  claude-opus-5-5:\n"
        "    budget_tokens: null\n"
    )
    monkeypatch.setenv("HYGIEIA_CONFIG", str(config))
    settings = load_settings()
    info = model_info_for(settings, "acme-large-2")
    assert (info.context_window, info.max_output, info.min_cacheable, info.known) == (
        500_000,
        16_000,
        2048,
        True,
    )
    assert budget_for(settings, "acme-large-2") == 300_000
    assert budget_for(settings, "claude-opus-5-5") is None  # the deployer bought the whole 1M


async def test_doctor_names_a_model_the_table_does_not_know() -> None:
    settings = load_settings(model="claude-nova-9")
    checks = {c.name: c for c in await run_checks(settings, contact_endpoints=False)}
    assert checks["models"].status == "warn"
    assert "claude-nova-9" in checks["models"].detail and "conservative defaults" in checks["models"].detail


async def test_doctor_suggests_the_closest_model_of_the_table() -> None:
    settings = load_settings(model="claude-sonet-5-5")
    checks = {c.name: c for c in await run_checks(settings, contact_endpoints=False)}
    assert "claude-sonet-5-5 (did you mean claude-sonnet-5-5?)" in checks["models"].detail


async def test_doctor_shows_window_and_budget_of_a_known_model() -> None:
    checks = {c.name: c for c in await run_checks(load_settings(), contact_endpoints=False)}
    assert checks["models"].status == "ok"
    assert "claude-sonnet-5-5: window 1,000,000, budget 200,000" in checks["models"].detail


async def test_the_default_caching_policy_is_auto() -> None:
    checks = {c.name: c for c in await run_checks(load_settings(), contact_endpoints=False)}
    assert checks["prompt caching"].status == "ok"
    assert checks["prompt caching"].detail == "cache_ttl auto, breakpoints"


async def test_doctor_recommends_auto_caching_on_a_fixed_ttl() -> None:
    settings = load_settings(prompt_caching={"cache_ttl": "5m"})
    checks = {c.name: c for c in await run_checks(settings, contact_endpoints=False)}
    assert checks["prompt caching"].status == "ok"
    assert checks["prompt caching"].detail.startswith("cache_ttl 5m, breakpoints; cache_ttl: auto")


async def test_doctor_warns_when_caching_is_off() -> None:
    settings = load_settings(prompt_caching={"enabled": False})
    checks = {c.name: c for c in await run_checks(settings, contact_endpoints=False)}
    assert checks["prompt caching"].status == "warn"


def test_context_shows_where_the_thresholds_sit_in_tokens_of_the_budget() -> None:
    session = AgentSession("s", "sys", "claude-sonnet-5-5", 1_000_000, budget_tokens=200_000)
    line = budget_line(session, CompressionSettings())
    assert line == (
        "Compaction at 100,000 tokens during a turn (50%) and 170,000 before one (85%) of the budget."
    )


async def test_doctor_prints_the_effective_budget_and_every_threshold_in_tokens() -> None:
    checks = {c.name: c for c in await run_checks(load_settings(), contact_endpoints=False)}
    assert checks["budget"].detail == (
        "claude-sonnet-5-5: effective budget 200,000 (window 1,000,000); thresholds in tokens: "
        "in-loop 100,000 (50%), hygiene 170,000 (85%), prune 70,000 (35%), sweep 120,000 (60%)"
    )


async def test_doctor_says_effective_when_the_budget_exceeds_the_window() -> None:
    settings = load_settings(model="claude-sonnet-4-5", compression={"budget_tokens": 300_000})
    checks = {c.name: c for c in await run_checks(settings, contact_endpoints=False)}
    assert "claude-sonnet-4-5: window 200,000, budget 300,000 (effective 200,000" in checks["models"].detail
    head = "claude-sonnet-4-5: budget 300,000, effective 200,000 (the window)"
    assert checks["budget"].detail.startswith(head)
    assert "sweep 120,000 (60%)" in checks["budget"].detail
