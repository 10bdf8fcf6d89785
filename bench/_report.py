"""What a bench script reports to ``hygieia bench --json`` / ``--compare`` (see bench/README.md).

    report = Report("search", full=args.full)
    report.add("sqlite/common word/p95", 12.5)          # ms, lower is better
    report.add("sqlite/msgs per s", 2100, unit="msg/s", better="higher")
    report.save()   # writes $HYGIEIA_BENCH_JSON when hygieia set it; does nothing otherwise

A script still prints its own table for people; this is the machine copy of its numbers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

ENV = "HYGIEIA_BENCH_JSON"


class Report:
    def __init__(self, bench: str, *, full: bool) -> None:
        self.bench = bench
        self.full = full
        self.metrics: dict[str, dict[str, object]] = {}
        self.notes: dict[str, object] = {}

    def add(
        self, key: str, value: float, *, unit: str = "ms", better: Literal["lower", "higher"] = "lower"
    ) -> None:
        """One number; ``key`` is unique within the script (``engine/case/statistic``)."""
        self.metrics[key] = {"value": round(float(value), 3), "unit": unit, "better": better}

    def note(self, key: str, value: object) -> None:
        """Context that is not compared (corpus size, build time)."""
        self.notes[key] = value

    def save(self) -> None:
        path = os.environ.get(ENV)
        if not path:
            return
        document = {"bench": self.bench, "full": self.full, "metrics": self.metrics, "notes": self.notes}
        Path(path).write_text(json.dumps(document, indent=1, ensure_ascii=False), encoding="utf-8")
