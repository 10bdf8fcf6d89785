"""A context-engine plugin that cannot be used stops `hygieia run` with one line naming it and the
cause, before the database is opened or migrated; `hygieia doctor` fails its context engine line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.gateway.cli.test_cli import hygieia
from tests.process_env import clean_env

REPO = Path(__file__).resolve().parents[3]

BROKEN = {
    "import-error": ("import hygieia_no_such_dependency\n", "ModuleNotFoundError"),
    "exit-at-import": ("raise SystemExit(3)\n", "SystemExit(3)"),
    "wrong-factory-type": ("def make(deps):\n    return {'engine': 'not one'}\n", "returned dict"),
    "factory-exits": ("import sys\n\ndef make(deps):\n    sys.exit('bad flags')\n", "SystemExit"),
}


def install(root: Path, source: str) -> None:
    """A distribution on the child's path whose entry point registers the engine ``shaky``."""
    (root / "shaky_engine_plugin.py").write_text(
        source + ("" if "def make" in source else "\ndef make(deps):\n    return None\n")
    )
    info = root / "shaky_engine_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shaky_engine_plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""
        [hygieia.context_engines]
        shaky = shaky_engine_plugin:make
        """)
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    clean = clean_env()
    clean.update(
        {
            "HYGIEIA_DATA_DIR": str(tmp_path / "data"),
            "HYGIEIA_CONTEXT__ENGINE": "shaky",
            "PYTHONPATH": f"{plugins}:{REPO}",
            "COLUMNS": "200",
        }
    )
    return clean


@pytest.mark.parametrize("case", list(BROKEN))
def test_run_stops_on_a_broken_plugin_with_one_line_before_touching_the_database(
    env: dict[str, str], tmp_path: Path, case: str
) -> None:
    source, cause = BROKEN[case]
    install(tmp_path / "plugins", source)
    result = hygieia("run", "--platform", "console", env=env, stdin="hello\n")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "context engine 'shaky'" in lines[0] and cause in lines[0]
    assert not (tmp_path / "data" / "hygieia.db").exists()


@pytest.mark.parametrize("case", list(BROKEN))
def test_doctor_fails_the_context_engine_line_for_a_broken_plugin(
    env: dict[str, str], tmp_path: Path, case: str
) -> None:
    source, cause = BROKEN[case]
    install(tmp_path / "plugins", source)
    result = hygieia("doctor", "--offline", "--json", env=env)
    assert result.returncode == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["context engine"]["status"] == "fail"
    assert "context engine 'shaky'" in checks["context engine"]["detail"]
    assert cause in checks["context engine"]["detail"]
