"""``hygieia bench``: run the benchmark scripts in ``bench/``, show their tables, keep their numbers.

The registry is the folder: every ``bench/*.py`` whose name does not start with ``_`` is a
benchmark, run in a fresh interpreter (``--full`` passed on). A script that wants its
numbers kept writes them as JSON to the file named by ``$HYGIEIA_BENCH_JSON``
(``bench/_report.py`` does it in one line). ``--json`` prints every script's numbers as one
document (the tables go to stderr); ``--compare FILE`` prints each number next to the
same number in FILE, as a ratio. See bench/README.md.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from agent.clock import utcnow
from gateway.cli.common import err, out, print_json

JSON_ENV = "HYGIEIA_BENCH_JSON"
FORMAT = 1
"""Version of the ``--json`` document."""
REGRESSION = 1.5
"""A ratio to the baseline above this is named on its own ``REGRESSION`` line (CI's log shows it)."""


def bench_dir() -> Path | None:
    """``bench/`` of the checkout: next to the working directory or to the installed package."""
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        candidate = root / "bench"
        if candidate.is_dir():
            return candidate
    return None


def _run(folder: Path, stem: str, full: bool, *, quiet_stdout: bool) -> tuple[int, dict[str, Any] | None]:
    """Run one script; its exit code and the numbers it saved (``None`` when it saved none)."""
    with tempfile.TemporaryDirectory(prefix="hygieia-bench-") as tmp:
        saved = Path(tmp) / f"{stem}.json"
        env = {**os.environ, JSON_ENV: str(saved)}
        args = [sys.executable, str(folder / f"{stem}.py"), *(["--full"] if full else [])]
        stdout = sys.stderr if quiet_stdout else None
        code = subprocess.call(args, cwd=folder.parent, env=env, stdout=stdout)
        if not saved.is_file():
            return code, None
        try:
            return code, dict(json.loads(saved.read_text(encoding="utf-8")))
        except (ValueError, TypeError):
            err.print(f"{stem}: its JSON output is not valid; ignored")
            return code, None


def _machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(terse=True),
    }


def _load_baseline(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        err.print(f"cannot read the baseline {path}: {exc}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    if not isinstance(document, dict) or not isinstance(document.get("benches"), dict):
        err.print(f"{path} is not a `hygieia bench --json` document", soft_wrap=True, highlight=False)
        raise typer.Exit(2)
    return document


def compare_rows(now: dict[str, Any], baseline: dict[str, Any]) -> list[tuple[str, str, float, float, float]]:
    """``(bench, metric, baseline, now, ratio)`` for every number both documents hold.

    The ratio is now / baseline for a lower-is-better number and baseline / now for a
    higher-is-better one, so above 1 always means slower (worse) than the baseline.
    """
    rows = []
    for bench, result in now["benches"].items():
        before = baseline["benches"].get(bench, {}).get("metrics", {})
        for key, metric in result.get("metrics", {}).items():
            old = before.get(key)
            if old is None:
                continue
            value, base = float(metric["value"]), float(old["value"])
            higher = metric.get("better") == "higher"
            num, den = (base, value) if higher else (value, base)
            ratio = num / den if den else float("inf") if num else 1.0
            rows.append((bench, key, base, value, ratio))
    return rows


def regression_lines(rows: list[tuple[str, str, float, float, float]]) -> list[str]:
    """One line per number more than :data:`REGRESSION` times worse than the baseline, or one
    line saying there is none (plain text, so that a log search finds ``REGRESSION``)."""
    worse = [row for row in rows if row[4] > REGRESSION]
    if not worse:
        return [f"compare: {len(rows)} numbers, none more than {REGRESSION}x worse than the baseline"]
    return [
        f"REGRESSION {bench} {key}: {value:g} vs {base:g}, {ratio:.2f}x the baseline (over {REGRESSION}x)"
        for bench, key, base, value, ratio in worse
    ]


def _compare_table(rows: list[tuple[str, str, float, float, float]], baseline: Path) -> Table:
    table = Table(title=f"Compared with {baseline} (ratio > 1: worse than the baseline)")
    for column in ("bench", "metric", "baseline", "now", "ratio"):
        table.add_column(column, justify="right" if column in ("baseline", "now", "ratio") else "left")
    for bench, key, base, value, ratio in rows:
        style = "red" if ratio > 1.25 else "green" if ratio < 0.8 else ""
        table.add_row(
            bench, key, f"{base:g}", f"{value:g}", f"[{style}]{ratio:.2f}x[/]" if style else f"{ratio:.2f}x"
        )
    return table


def bench_command(
    name: Annotated[
        str | None,
        typer.Argument(metavar="NAME", help="A script in bench/, without .py; every one when omitted."),
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="Full-size run instead of the quick default.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the numbers as one JSON document (tables go to stderr).")
    ] = False,
    compare: Annotated[
        Path | None,
        typer.Option(
            "--compare", metavar="FILE", help="A saved `--json` document: show each number's ratio to it."
        ),
    ] = None,
) -> None:
    """Run one benchmark (or all) in a fresh interpreter and print its table."""
    folder = bench_dir()
    if folder is None:
        err.print("no bench/ folder found: run `hygieia bench` from a checkout of the project")
        raise typer.Exit(2)
    available = sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))
    if name is not None and name not in available:
        err.print(f"no benchmark {name!r}; available: {', '.join(available) or 'none'}")
        raise typer.Exit(2)
    baseline = None if compare is None else _load_baseline(compare)
    failed = 0
    benches: dict[str, Any] = {}
    for stem in [name] if name else available:
        (err if as_json else out).rule(stem)
        code, saved = _run(folder, stem, full, quiet_stdout=as_json)
        failed += code != 0
        if saved is not None:
            benches[stem] = {key: saved[key] for key in ("full", "metrics", "notes") if key in saved}
    document = {
        "format": FORMAT,
        "created": utcnow().isoformat(timespec="seconds"),
        "machine": _machine(),
        "benches": benches,
    }
    if as_json:
        print_json(document)
    if baseline is not None and compare is not None:
        rows = compare_rows(document, baseline)
        console = err if as_json else out
        console.print(_compare_table(rows, compare))
        for line in regression_lines(rows):
            console.print(line, soft_wrap=True, highlight=False, markup=False)
    raise typer.Exit(1 if failed else 0)
