"""docs/cli.md against the command itself: every command, flag and chat command the code has is in the
doc, and every option's help reads as a sentence with a named value, not a bare type."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.core import TyperArgument, TyperGroup, TyperOption

from gateway.cli.app import app
from gateway.serving.commands import ADMIN_HELP, ALIASES, HELP

DOC = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text(encoding="utf-8")


def _commands(group: Any, path: str = "hygieia") -> Iterator[tuple[str, Any]]:
    if isinstance(group, TyperGroup):
        for name, command in group.commands.items():
            yield from _commands(command, f"{path} {name}")
    else:
        yield path, group


COMMANDS = dict(_commands(typer.main.get_command(app)))


def _row(path: str) -> str:
    """The table row of docs/cli.md documenting ``path`` (its first cell starts with it)."""
    rows = [line for line in DOC.splitlines() if re.match(rf"\| `{re.escape(path)}( |`)", line)]
    assert len(rows) == 1, f"docs/cli.md has {len(rows)} rows for `{path}`"
    return rows[0]


def _flags(command: Any) -> list[str]:
    return [
        flag
        for param in command.params
        if isinstance(param, TyperOption)
        for flag in (*param.opts, *param.secondary_opts)
        if flag != "--help"
    ]


@pytest.mark.parametrize("path", COMMANDS)
def test_every_flag_of_a_command_is_in_its_row_of_the_doc(path: str) -> None:
    row = _row(path)
    missing = [flag for flag in _flags(COMMANDS[path]) if not re.search(rf"{re.escape(flag)}\b", row)]
    assert missing == [], f"docs/cli.md, `{path}`: {missing}"


@pytest.mark.parametrize("path", COMMANDS)
def test_every_argument_of_a_command_is_in_its_row_by_the_name_help_shows(path: str) -> None:
    row = _row(path)
    for param in COMMANDS[path].params:
        if isinstance(param, TyperArgument):
            assert param.metavar is not None and re.search(rf"\b{param.metavar}\b", row.split("|")[1])


def test_every_chat_command_is_in_the_doc() -> None:
    chat = DOC.split("## In chat", 1)[1]
    missing = [name for name in (*HELP, *ADMIN_HELP, *ALIASES) if f"`/{name}" not in chat]
    assert missing == []


@pytest.mark.parametrize("path", COMMANDS)
def test_every_option_has_help_and_every_value_a_name(path: str) -> None:
    command = COMMANDS[path]
    assert command.help and command.help.strip().endswith(".")
    for param in command.params:
        assert isinstance(param, TyperOption | TyperArgument)
        name = param.name
        if isinstance(param, TyperOption) and "--help" in param.opts:
            continue
        assert getattr(param, "help", None), f"{path} {name}: no help"
        if isinstance(param, TyperOption) and not param.is_flag:
            assert param.metavar, f"{path} --{name}: help shows its bare type"
