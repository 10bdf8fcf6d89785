"""Splitter benchmark: parts and time on the adversarial corpus, at Telegram's and Discord's limits,
with the default bound of 10 parts and unbounded. Prints a table; the worst case is the last row.

    python bench/splitter.py [--full]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from gateway.splitter import DEFAULT_MAX_PARTS, split_message, utf16_len

PLATFORMS: dict[str, tuple[int, Callable[[str], int]]] = {
    "telegram": (4096, utf16_len),
    "discord": (2000, len),
}


def mixed(size: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    atoms = ["```\n", "~~~\n", "`" * 300, "x ", "🙂", "word. ", "\n\n", "```python\n", " " * 200]
    atoms += ["\u200d" * 5, "שלום ", "`\n" * 20, "e\u0301" * 30, "🇫🇷", "\u202e"]
    out: list[str] = []
    total = 0
    while total < size:
        out.append(rng.choice(atoms))
        total += len(out[-1])
    return "".join(out)[:size]


def corpus(scale: int) -> dict[str, str]:
    """Named adversarial texts; ``scale`` multiplies their size."""
    return {
        "3,031 backticks": "`" * 3031,
        "backticks": "`" * (8000 * scale),
        "backtick lines": ("`" * 97 + "\n") * (100 * scale),
        "tilde and backtick fences": ("~~~\n```\n````\n~~~~~\n" * 500 * scale),
        "fence line longer than the limit": "```" + "x" * (5000 * scale) + "\ncode\n```",
        "one long line": "x" * (100_000 * scale),
        "surrogate pairs": "🙂👨\u200d👩\u200d👧" * (5000 * scale),
        "zero-width joiners": "\u200d" * (20_000 * scale),
        "combining marks": "e" + "\u0301" * (20_000 * scale),
        "RTL text": "שלום עולם مرحبا " * (2000 * scale),
        "mixed, 1 MB": mixed(1_000_000 * scale),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="texts 8x larger")
    scale = 8 if parser.parse_args().full else 1
    table = Table(title="split_message on adversarial text (time is the best of 3)")
    for column in ("text", "characters", "platform", "max parts", "parts", "ms"):
        table.add_column(column, justify="left" if column in ("text", "platform") else "right")
    worst = (0.0, "")
    for name, text in corpus(scale).items():
        for platform, (limit, measure) in PLATFORMS.items():
            for bound in (DEFAULT_MAX_PARTS, None):
                best = float("inf")
                parts: list[str] = []
                for _ in range(3):
                    started = time.perf_counter()
                    parts = split_message(text, limit, measure=measure, max_parts=bound)
                    best = min(best, time.perf_counter() - started)
                assert all(measure(p) <= limit for p in parts)
                shown = "none" if bound is None else str(bound)
                table.add_row(name, f"{len(text):,}", platform, shown, str(len(parts)), f"{best * 1000:.1f}")
                if bound is not None and best > worst[0]:
                    worst = (best, f"{name} on {platform}: {len(parts)} parts, {best * 1000:.1f} ms")
    Console().print(table)
    Console().print(f"worst case with the default bound: {worst[1]}")


if __name__ == "__main__":
    main()
