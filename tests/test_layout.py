"""The shape of the tree: modules named for what they are, imports pointing one way."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WRAPPED_LIBRARIES = {"telegram", "discord", "anthropic", "sqlalchemy", "alembic", "apscheduler"}
MAX_MODULE_LINES = 500


def _modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("package", ["agent", "gateway"])
def test_no_module_or_package_is_named_like_a_wrapped_library(package: str) -> None:
    named = [
        p.relative_to(REPO)
        for p in _modules(package)
        for part in (*p.relative_to(REPO).parent.parts, p.stem)
        if part in WRAPPED_LIBRARIES
    ]
    assert named == []


@pytest.mark.parametrize("package", ["agent", "gateway"])
def test_no_module_is_longer_than_500_lines(package: str) -> None:
    # A module past ~500 lines is usually two jobs (STYLE.md): split it rather than raise the bar.
    long = {
        str(p.relative_to(REPO)): lines
        for p in _modules(package)
        if (lines := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_agent_imports_nothing_of_the_gateway() -> None:
    offenders = {
        str(p.relative_to(REPO)): sorted(n for n in _imports(p) if _under(n, "gateway"))
        for p in _modules("agent")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_store_imports_nothing_of_serving_or_outbound() -> None:
    upward = ("gateway.serving", "gateway.outbound", "gateway.platforms", "gateway.cli", "gateway.runner")
    offenders = {
        str(p.relative_to(REPO)): sorted(n for n in _imports(p) if any(_under(n, u) for u in upward))
        for p in _modules("gateway/store")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_platform_adapters_import_no_cli_admin_or_store() -> None:
    upward = ("gateway.cli", "gateway.admin", "gateway.store", "gateway.serving", "gateway.runner")
    offenders = {
        str(p.relative_to(REPO)): sorted(n for n in _imports(p) if any(_under(n, u) for u in upward))
        for p in _modules("gateway/platforms")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_test_helper_module_is_named_like_a_conftest() -> None:
    assert sorted(p.name for p in (REPO / "tests").rglob("conftest_*.py")) == []


def test_every_gateway_test_folder_mirrors_a_source_package() -> None:
    for folder in (REPO / "tests" / "gateway").rglob("*"):
        if folder.is_dir() and (folder / "__init__.py").exists():
            source = REPO / "gateway" / folder.relative_to(REPO / "tests" / "gateway")
            assert source.is_dir(), f"tests/{folder.relative_to(REPO / 'tests')} mirrors no package"


def test_no_code_comment_names_a_tracker_issue() -> None:
    pattern = re.compile(r"\b[Ii]ssue ?#?\d+")
    found = [
        f"{p.relative_to(REPO)}:{n}"
        for top in ("agent", "gateway", "tests", "bench", "migrations")
        for p in sorted((REPO / top).rglob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and p.name != "test_layout.py"
    ]
    assert found == []


def test_every_test_that_names_the_repository_root_finds_it() -> None:
    # A test module moved one folder deeper keeps working only if its parents[N] follows it.
    pattern = re.compile(r"^REPO = Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]", re.M)
    wrong = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        found = pattern.search(path.read_text(encoding="utf-8"))
        if found and not (path.resolve().parents[int(found.group(1))] / "pyproject.toml").exists():
            wrong.append(str(path.relative_to(REPO)))
    assert wrong == []
