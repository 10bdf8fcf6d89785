"""``hygieia bench``: the bench/ folder is the registry; --json keeps the numbers, --compare shows ratios."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli.bench import compare_rows

SCRIPT = """
import json, os, sys
full = "--full" in sys.argv
print("| table for people |")
path = os.environ.get("HYGIEIA_BENCH_JSON")
if path:
    metrics = {{"p95": {{"value": {p95} * (10 if full else 1), "unit": "ms", "better": "lower"}},
               "rate": {{"value": {rate}, "unit": "msg/s", "better": "higher"}}}}
    json.dump({{"bench": "x", "full": full, "metrics": metrics, "notes": {{"rows": 5}}}}, open(path, "w"))
sys.exit({code})
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "fast.py").write_text(SCRIPT.format(p95=10, rate=100, code=0))
    (bench / "plain.py").write_text("print('a table only')\n")
    (bench / "_helper.py").write_text("raise SystemExit('never run')\n")
    return tmp_path


def bench(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "bench", *args],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_script_but_helpers_runs_and_prints_its_table(checkout: Path) -> None:
    done = bench(checkout)
    assert done.returncode == 0, done.stderr
    assert "table for people" in done.stdout and "a table only" in done.stdout
    assert "never run" not in done.stdout + done.stderr


def test_json_collects_the_numbers_of_every_script_that_saved_some(checkout: Path) -> None:
    done = bench(checkout, "--json", "--full")
    document = json.loads(done.stdout)
    assert document["format"] == 1 and document["machine"]["cpus"]
    assert set(document["benches"]) == {"fast"}
    assert document["benches"]["fast"]["metrics"]["p95"]["value"] == 100
    assert document["benches"]["fast"]["full"] is True
    assert "table for people" in done.stderr


def test_compare_shows_each_number_as_a_ratio_to_the_baseline(checkout: Path) -> None:
    baseline = checkout / "baseline.json"
    baseline.write_text(bench(checkout, "fast", "--json").stdout)
    (checkout / "bench" / "fast.py").write_text(SCRIPT.format(p95=20, rate=50, code=0))
    done = bench(checkout, "fast", "--compare", str(baseline))
    assert done.returncode == 0, done.stderr
    assert "2.00x" in done.stdout and "p95" in done.stdout and "rate" in done.stdout


def test_a_number_over_one_and_a_half_times_worse_is_named_on_a_regression_line(checkout: Path) -> None:
    baseline = checkout / "baseline.json"
    baseline.write_text(bench(checkout, "fast", "--json").stdout)
    (checkout / "bench" / "fast.py").write_text(SCRIPT.format(p95=16, rate=90, code=0))
    done = bench(checkout, "fast", "--compare", str(baseline))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("REGRESSION")]
    assert lines == ["REGRESSION fast p95: 16 vs 10, 1.60x the baseline (over 1.5x)"]


def test_a_compare_within_the_allowance_says_so(checkout: Path) -> None:
    baseline = checkout / "baseline.json"
    baseline.write_text(bench(checkout, "fast", "--json").stdout)
    done = bench(checkout, "fast", "--compare", str(baseline))
    assert "REGRESSION" not in done.stdout
    assert "compare: 2 numbers, none more than 1.5x worse than the baseline" in done.stdout


def test_ratio_above_one_always_means_worse() -> None:
    def doc(p95: float, rate: float) -> dict[str, object]:
        metrics = {
            "p95": {"value": p95, "unit": "ms", "better": "lower"},
            "rate": {"value": rate, "unit": "msg/s", "better": "higher"},
        }
        return {"benches": {"b": {"metrics": metrics}}}

    rows = compare_rows(doc(30, 50), doc(10, 100))
    assert [(key, ratio) for _, key, _, _, ratio in rows] == [("p95", 3.0), ("rate", 2.0)]


def test_a_failing_script_makes_the_run_fail(checkout: Path) -> None:
    (checkout / "bench" / "broken.py").write_text(SCRIPT.format(p95=1, rate=1, code=3))
    assert bench(checkout).returncode == 1


def test_an_unreadable_baseline_is_one_clear_line(checkout: Path) -> None:
    (checkout / "nope.json").write_text("{}")
    done = bench(checkout, "fast", "--compare", str(checkout / "nope.json"))
    assert done.returncode == 2 and "is not a `hygieia bench --json` document" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_bench_is_named(checkout: Path) -> None:
    done = bench(checkout, "nope")
    assert done.returncode == 2 and "available: fast, plain" in done.stderr
