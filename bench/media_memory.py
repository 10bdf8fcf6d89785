"""Peak memory of reading one picture (``prepare_image``), each case in a fresh interpreter.

The files are made here; for each case a child process reads one, notes its peak RSS
(``VmHWM``: ``ru_maxrss`` would carry this process's peak across exec), runs ``prepare_image``
under ``tracemalloc`` and notes the peak again: the rise is what that one picture cost. Pillow
decodes outside Python's allocator, so tracemalloc sees only the Python side (the file, its
base64, the result). Cases: the 13,000 x 13,000 PNG bomb (669 KB), a PNG at the decode cap, a
6000 x 4000 JPEG (decoded reduced), a phone-sized JPEG.

    python bench/media_memory.py [--full] [--against CHECKOUT]

``--against`` runs the same cases with another checkout's code (say a clone at the commit
before the fix) for the before/after numbers in docs/media.md. ``--full`` adds a 48 Mpx JPEG
and repeats each case three times (the peak reported is the highest).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _report import Report
from PIL import Image
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the bomb is made by the tests' helper
from tests.media_files import png_bomb  # noqa: E402

CHILD = r"""
import json, sys, time, tracemalloc, warnings
def hwm():  # this process image's peak RSS (ru_maxrss carries the parent's peak across exec)
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmHWM:"))
sys.path.insert(0, sys.argv[1])
warnings.simplefilter("ignore")  # Pillow's DecompressionBombWarning, in the old code
try:
    from gateway.serving import media
except ImportError:
    from gateway import media
prepare_image = media.prepare_image
with open(sys.argv[2], "rb") as file:
    data = file.read()
before = hwm()
tracemalloc.start()
started = time.process_time()
try:
    result = prepare_image(data)
    outcome = f"{result.width}x{result.height} {result.media_type}"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {exc}"[:70]
cpu = time.process_time() - started
_, traced = tracemalloc.get_traced_memory()
after = hwm()
print(json.dumps({"bytes": len(data), "before": before, "after": after, "traced": traced,
                  "cpu": cpu, "outcome": outcome, "module": media.__file__}))
"""


def make(kind: str, width: int, height: int, folder: Path) -> Path:
    """The case's file, made here so that making it does not count in the child's peak."""
    path = folder / f"{kind}-{width}x{height}"
    if kind == "bomb":
        path.write_bytes(png_bomb(width, height))
    else:
        image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
        image.save(path, format=kind, quality=90)
    return path


def measure(code: Path, path: Path) -> dict[str, object]:
    """One case in a fresh interpreter with ``code`` first on the path."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(code), str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="a 48 Mpx JPEG too; each case 3 times")
    parser.add_argument("--against", type=Path, default=ROOT, help="the checkout whose code is measured")
    args = parser.parse_args()
    cases = [
        ("png bomb 13000x13000", "bomb", 13_000, 13_000),
        ("png 4800x5000 (decode cap)", "bomb", 4800, 5000),
        ("jpeg 6000x4000", "JPEG", 6000, 4000),
        ("jpeg 4032x3024 (phone)", "JPEG", 4032, 3024),
    ]
    if args.full:
        cases.append(("jpeg 8000x6000", "JPEG", 8000, 6000))
    runs = 3 if args.full else 1
    code = args.against.resolve()
    report = Report("media_memory", full=args.full)
    report.note("code", str(code))
    modules: set[str] = set()
    table = Table(title=f"prepare_image peak memory, code from {code}")
    for column in ("case", "file", "RSS before", "RSS after", "rise", "tracemalloc", "CPU s", "outcome"):
        table.add_column(column, justify="left" if column in ("case", "outcome") else "right")
    folder = Path(tempfile.mkdtemp(prefix="hygieia-media-"))
    for name, kind, width, height in cases:
        path = make(kind, width, height, folder)
        results = [measure(code, path) for _ in range(runs)]
        worst = max(results, key=lambda r: int(str(r["after"])) - int(str(r["before"])))
        before, after = int(str(worst["before"])), int(str(worst["after"]))
        traced, cpu = int(str(worst["traced"])), float(str(worst["cpu"]))
        rise = max(0, after - before)
        modules.add(str(worst["module"]))
        table.add_row(
            name,
            f"{int(str(worst['bytes'])) / 1e3:,.0f} KB",
            f"{before / 1e6:,.0f} MB",
            f"{after / 1e6:,.0f} MB",
            f"{rise / 1e6:,.0f} MB",
            f"{traced / 1e6:,.1f} MB",
            f"{cpu:.2f}",
            str(worst["outcome"]),
        )
        report.add(f"{name}/rss rise", rise / 1e6, unit="MB")
        report.add(f"{name}/cpu", cpu * 1000)
    shutil.rmtree(folder, ignore_errors=True)
    console = Console(width=150)
    console.print(table)
    console.print(f"measured: {', '.join(sorted(modules))}")
    report.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
