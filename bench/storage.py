"""Storage and bulk-load time of the search corpus, ours and Hermes Agent's, side by side.

The corpus of ``hygieia bench search`` (chat-like messages, 90% archived; ``_search_corpus.py``)
is bulk-loaded into a migrated SQLite database of ours (triggers off, FTS rebuilt after,
``ANALYZE``) and, when Hermes Agent is installed in its own virtual environment
(``$HYGIEIA_HERMES_PYTHON``, default ``/work/hermes-venv/bin/python``), into Hermes' session
database the same way (``_hermes_store_driver.py``). Reported: the file's size, the load's
seconds (migration / schema creation not counted), and the largest tables and indexes
(SQLite's ``dbstat``). The two loads run one after the other, never at once.

    python bench/storage.py [--full] [--size N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _search_corpus as corpus_mod
from _report import Report
from rich.console import Console
from rich.table import Table

from gateway.store.migrate import upgrade_to_head
from gateway.store.search_index import cjk_index_text

HERMES_ENV = "HYGIEIA_HERMES_PYTHON"
HERMES_DEFAULT = "/work/hermes-venv/bin/python"
SIZES = {"default": 112_000, "full": 1_120_000}
MB = 1_000_000


def ours(folder: Path, size: int) -> dict[str, Any]:
    path = folder / "hygieia.db"
    asyncio.run(upgrade_to_head(f"sqlite+aiosqlite:///{path}"))
    phases: dict[str, float] = {}
    started, cpu = time.perf_counter(), time.process_time()
    corpus_mod.load_sqlite(str(path), corpus_mod.Corpus(size), cjk_index_text, lambda *_, **__: None, phases)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn = sqlite3.connect(path)
    tables = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    conn.close()
    return {"seconds": seconds, "cpu": cpu, "bytes": path.stat().st_size, "tables": tables, "phases": phases}


def hermes(python: str, folder: Path, size: int) -> dict[str, Any]:
    driver = Path(__file__).with_name("_hermes_store_driver.py")
    home = folder / "home"
    home.mkdir()
    # -E -s: no PYTHONPATH, no user site, so our own `agent` can never shadow Hermes' one; the
    # script's folder (bench/, no package of ours) stays on the path for the corpus generator.
    done = subprocess.run(
        [python, "-E", "-s", str(driver)],
        input=json.dumps({"path": str(folder / "hermes.db"), "size": size}),
        capture_output=True,
        text=True,
        env={"HOME": str(home), "PATH": os.environ.get("PATH", ""), "HERMES_HOME": f"{home}/.hermes"},
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the Hermes driver failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _cells(store: dict[str, Any]) -> tuple[str, str, str]:
    return f"{store['bytes'] / MB:.1f}", f"{store['seconds']:.1f}", f"{store['cpu']:.1f}"


def _largest(tables: dict[str, int], count: int = 6) -> str:
    top = sorted(tables.items(), key=lambda kv: -kv[1])[:count]
    return ", ".join(f"{name} {value / MB:.0f}" for name, value in top)


# Our step and Hermes' that do the same work, for the side-by-side table.
_PHASES = (
    ("rows (made and inserted)", "rows (made and inserted)", "rows, made (the same generator) and inserted"),
    ("messages_fts", "messages_fts", "words index"),
    ("messages_fts_trgm", "messages_fts_trigram", "trigram index"),
    ("commit, ANALYZE, close", "commit, ANALYZE, close", "commit, ANALYZE, log written back"),
)


def _phase_table(mine: dict[str, Any], theirs: dict[str, Any] | None) -> Table:
    """Where each load's CPU went, step by step: what a target for the load has to cut."""
    table = Table(title="Where the bulk load's CPU goes (s)")
    table.add_column("step")
    table.add_column("ours", justify="right")
    if theirs is not None:
        table.add_column("Hermes", justify="right")
        table.add_column("ours - Hermes", justify="right")
    for key, hermes_key, label in _PHASES:
        ours_s = mine["phases"].get(key, 0.0)
        if theirs is None:
            table.add_row(label, f"{ours_s:.2f}")
            continue
        theirs_s = theirs.get("phases", {}).get(hermes_key, 0.0)
        table.add_row(label, f"{ours_s:.2f}", f"{theirs_s:.2f}", f"{ours_s - theirs_s:+.2f}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="1,120,000 messages instead of 112,000")
    parser.add_argument("--size", type=int, help="messages in the corpus (overrides --full)")
    args = parser.parse_args()
    size = args.size or SIZES["full" if args.full else "default"]
    report = Report("storage", full=args.full)
    report.note("messages", size)
    python = os.environ.get(HERMES_ENV, HERMES_DEFAULT)
    table = Table(title=f"Storage and bulk load, {size:,} messages (90% archived), SQLite")
    table.add_column("store")
    for column in ("file MB", "load s", "load CPU s"):
        table.add_column(column, justify="right")
    table.add_column("largest tables and indexes (MB)")
    theirs: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="hygieia-storage-") as tmp:
        mine = ours(Path(tmp), size)
        for key, _, label in _PHASES:
            report.add(f"sqlite/{label} CPU s", mine["phases"].get(key, 0.0), unit="s")
        report.add("sqlite/file MB", mine["bytes"] / MB, unit="MB")
        report.add("sqlite/load s", mine["seconds"], unit="s")
        report.add("sqlite/load CPU s", mine["cpu"], unit="s")
        table.add_row("ours", *_cells(mine), _largest(mine["tables"]))
        (Path(tmp) / "hygieia.db").unlink()
        if Path(python).exists():
            theirs = hermes(python, Path(tmp), size)
            ratios = {key: mine[key] / theirs[key] for key in ("bytes", "seconds", "cpu")}
            report.add("hermes/file MB", theirs["bytes"] / MB, unit="MB")
            report.add("hermes/load s", theirs["seconds"], unit="s")
            report.add("hermes/load CPU s", theirs["cpu"], unit="s")
            report.add("ratio/file", ratios["bytes"], unit="x")
            report.add("ratio/load", ratios["seconds"], unit="x")
            report.add("ratio/load CPU", ratios["cpu"], unit="x")
            report.note("hermes", theirs["version"])
            table.add_row(f"Hermes {theirs['version']}", *_cells(theirs), _largest(theirs["tables"]))
            table.add_row("ours / Hermes", *(f"{ratio:.2f}x" for ratio in ratios.values()), "")
        else:
            print(f"Hermes Agent: skipped ({python} not found; set {HERMES_ENV})", file=sys.stderr)
    load = os.getloadavg()
    report.note("loadavg", [round(x, 2) for x in load])
    report.save()
    console = Console(width=160)
    console.print(table)
    console.print(_phase_table(mine, theirs))
    print(f"load average {' '.join(f'{x:.2f}' for x in load)} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
