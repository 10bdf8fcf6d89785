"""A configuration mistake as an operator meets it: the command refuses in one line naming what to set, and
setting exactly that works."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.gateway.cli.test_cli import hygieia
from tests.process_env import clean_env

TOKEN = "123456:" + "A" * 35


def test_a_token_in_the_file_names_the_variable_that_then_works(tmp_path: Path) -> None:
    config = tmp_path / "hygieia.yaml"
    config.write_text(f"telegram:\n  mode: polling\n  token: '{TOKEN}'\n")
    env = clean_env() | {"HYGIEIA_DATA_DIR": str(tmp_path / "data"), "HYGIEIA_CONFIG": str(config)}
    refused = hygieia("doctor", "--offline", "--json", env=env)
    assert refused.returncode == 2 and TOKEN not in refused.stderr
    [named] = re.findall(r"set (\S+) in the environment", refused.stderr)
    assert named == "TELEGRAM_BOT_TOKEN"

    config.write_text("telegram:\n  mode: polling\n")
    started = hygieia("doctor", "--offline", "--json", env=env | {named: TOKEN})
    assert started.returncode == 0, started.stderr
    checks = {c["name"]: c for c in json.loads(started.stdout)}
    assert (checks["telegram"]["status"], checks["telegram"]["detail"]) == (
        "ok",
        "token well-formed (not contacted)",
    )


def test_a_typo_in_the_file_is_named_by_its_key_path(tmp_path: Path) -> None:
    config = tmp_path / "hygieia.yaml"
    config.write_text("compression:\n  treshold: 0.4\n")
    env = clean_env() | {"HYGIEIA_DATA_DIR": str(tmp_path / "data"), "HYGIEIA_CONFIG": str(config)}
    result = hygieia("doctor", "--offline", env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"configuration error: {config}: compression.treshold is not a setting; did you mean "
        "compression.threshold?"
    )
