"""``mcp_servers:`` in hygieia.yaml: the shapes accepted, ``${NAME}`` references resolved at start,
literal secrets refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.errors import ConfigError
from gateway.config import load_settings
from gateway.runner.tool_servers import server_specs

FOUR_LINES = "mcp_servers:\n  github:\n    command: github-mcp\n    args: [stdio]\n"


def settings_from(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    config = tmp_path / "hygieia.yaml"
    config.write_text(text)
    monkeypatch.setenv("HYGIEIA_CONFIG", str(config))
    return load_settings()


def test_four_lines_of_yaml_add_a_stdio_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = settings_from(monkeypatch, tmp_path, FOUR_LINES)
    [spec] = server_specs(settings, {})
    assert (spec.name, spec.command, spec.args, spec.timeout_seconds) == (
        "github",
        "github-mcp",
        ("stdio",),
        60,
    )
    assert spec.allow == ()  # admins only


def test_references_in_env_and_headers_are_resolved_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    text = (
        "mcp_servers:\n"
        "  github:\n    command: gh-mcp\n    env:\n      GITHUB_TOKEN: ${GH_PAT}\n"
        "  web:\n    url: https://mcp.example/mcp\n    headers:\n      Authorization: Bearer ${WEB_KEY}\n"
    )
    settings = settings_from(monkeypatch, tmp_path, text)
    github, web = server_specs(settings, {"GH_PAT": "ghp_1", "WEB_KEY": "k2"})
    assert github.env == {"GITHUB_TOKEN": "ghp_1"}
    assert web.headers == {"Authorization": "Bearer k2"}


def test_an_unset_reference_leaves_that_server_down_saying_which(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    text = "mcp_servers:\n  github:\n    command: gh-mcp\n    env:\n      GITHUB_TOKEN: ${GH_PAT}\n"
    [spec] = server_specs(settings_from(monkeypatch, tmp_path, text), {})
    assert spec.unusable == "mcp_servers.github.env.GITHUB_TOKEN: ${GH_PAT} is not set in the environment"


@pytest.mark.parametrize(
    "entry",
    [
        "    command: gh-mcp\n    env:\n      GITHUB_TOKEN: ghp_literal\n",
        "    url: https://mcp.example/mcp\n    headers:\n      Authorization: Bearer abc123\n",
    ],
)
def test_a_literal_secret_in_env_or_headers_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, entry: str
) -> None:
    with pytest.raises(ConfigError, match=r"written in the file as \$\{"):
        settings_from(monkeypatch, tmp_path, "mcp_servers:\n  github:\n" + entry)


def test_a_reference_elsewhere_is_still_a_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN"):
        settings_from(monkeypatch, tmp_path, "telegram_bot_token: ${MY_TOKEN}\n")


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("    command: a\n    url: http://x/mcp\n", "either command"),
        ("    url: ftp://x/mcp\n", "must start with http"),
        ("    command: a\n    allow: [telegram:42]\n", "is not user:<platform>:<id>"),
    ],
)
def test_a_bad_entry_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, entry: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        settings_from(monkeypatch, tmp_path, "mcp_servers:\n  s:\n" + entry)
    assert "\n" not in str(caught.value)
