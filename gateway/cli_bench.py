"""``hygieia bench``: run the benchmark scripts in ``bench/`` and show their tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from gateway.cli_common import err, out


def bench_dir() -> Path | None:
    """``bench/`` of the checkout: next to the working directory or to the installed package."""
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        candidate = root / "bench"
        if candidate.is_dir():
            return candidate
    return None


def bench_command(
    name: Annotated[
        str | None, typer.Argument(help="A script in bench/ without .py; all when omitted.")
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="Full-size run instead of the quick default.")] = False,
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
    failed = 0
    for stem in [name] if name else available:
        out.rule(stem)
        args = [sys.executable, str(folder / f"{stem}.py"), *(["--full"] if full else [])]
        failed += subprocess.call(args, cwd=folder.parent) != 0
    raise typer.Exit(1 if failed else 0)
