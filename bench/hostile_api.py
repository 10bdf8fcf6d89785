"""What a hostile model API or transcription server now costs: per shape, the worst wall time and
the peak RSS rise of one call, each case in a fresh interpreter.

Model API (tests/fakes/anthropic_hostile.py), plain call and stream: retry-after 3600 (429 and
529), an HTTP date in 2100, retry-after-ms 3,600,000, a trickle (1 byte/s), an endless answer, a
512 MB gzip bomb (~0.5 MB sent), JSON 100,000 deep, and every wrong-types variant (the worst is
shown). Transcription (tests/fakes/transcription.py): a 300 MB gzip bomb (~0.3 MB sent), an
answer over the cap, JSON 100,000 deep, wrong types. Settings are the defaults except
``llm.deadline_seconds`` (``--deadline``, 5 s here; the default 300 s is what a trickle then
costs) and ``llm.max_retries`` 2.

    python bench/hostile_api.py [--full] [--deadline S]

``--full`` runs each case three times (the worst is reported).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _report import Report
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.fakes.anthropic_hostile import WRONG_EVENTS, WRONG_TYPES  # noqa: E402

CHILD = r"""
import asyncio, json, sys, time, warnings
sys.path.insert(0, sys.argv[1])
family, shape, way, variant = sys.argv[2:6]
variant, deadline = variant or None, float(sys.argv[6])
from tests.memory_probe import peak_rss

async def model_call():
    from agent.llm import AnthropicProvider
    from agent.provider import LLMRequest
    from agent.settings import LLMSettings
    from tests.fakes.anthropic_hostile import HostileAnthropic, gzip_bomb
    if shape == "gzip_bomb":
        gzip_bomb(way == "stream")
    request = LLMRequest(model="claude-sonnet-4-6", max_tokens=64,
                         messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    async with HostileAnthropic(shape, variant=variant) as fake:
        settings = LLMSettings(max_retries=2, deadline_seconds=deadline)
        provider = AnthropicProvider(api_key="sk-bench", base_url=fake.base_url, settings=settings)
        try:
            call = provider.create(request) if way == "plain" else provider.stream(request, len)
            return await measured(call)
        finally:
            await provider.aclose()

async def transcription_call():
    from gateway.config import Settings
    from gateway.serving.transcription import build_transcriber
    from tests.fakes.transcription import FakeTranscription, RawAnswer, deep_json, transcript_bomb
    answers = {
        "gzip_bomb": lambda: RawAnswer(transcript_bomb(), gzip=True),
        "oversized": lambda: RawAnswer.of({"text": "word " * 2_000_000}),
        "deep_json": lambda: RawAnswer(deep_json()),
        "wrong_types": lambda: RawAnswer.of({"text": ["a", "list"]}),
    }
    answer = answers[shape]()
    async with FakeTranscription() as fake:
        fake.answer_next(answer)
        stt = build_transcriber(Settings(media={"transcription": {"url": fake.url}}))
        return await measured(stt.transcribe(b"audio", "voice.ogg", "audio/ogg"))

async def measured(call):
    started = time.monotonic()
    with peak_rss() as peak:
        try:
            await asyncio.wait_for(call, 600)
            outcome = "answered"
        except BaseException as exc:
            outcome = f"{type(exc).__name__}: {exc}"
    return {"seconds": time.monotonic() - started, "rise": peak.rise, "outcome": outcome}

warnings.simplefilter("ignore")
result = asyncio.run(model_call() if family == "model" else transcription_call())
print(json.dumps(result))
"""

MODEL_SHAPES = (
    "retry_after_3600",
    "overloaded_3600",
    "retry_after_date_2100",
    "retry_after_ms",
    "trickle",
    "endless",
    "gzip_bomb",
    "deep_json",
    "wrong_types",
)
TRANSCRIPTION_SHAPES = ("gzip_bomb", "oversized", "deep_json", "wrong_types")


def measure(family: str, shape: str, way: str, variant: str, deadline: float) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), family, shape, way, variant, str(deadline)],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def cases() -> list[tuple[str, str, str, list[str]]]:
    found: list[tuple[str, str, str, list[str]]] = []
    for way in ("plain", "stream"):
        for shape in MODEL_SHAPES:
            variants = [""]
            if shape == "wrong_types":
                variants = list(WRONG_TYPES if way == "plain" else WRONG_EVENTS)
            found.append(("model", shape, way, variants))
    found.extend(("transcription", shape, "plain", [""]) for shape in TRANSCRIPTION_SHAPES)
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="each case three times, the worst reported")
    parser.add_argument(
        "--deadline", type=float, default=5.0, help="llm.deadline_seconds for the model calls"
    )
    args = parser.parse_args()
    runs = 3 if args.full else 1
    report = Report("hostile_api", full=args.full)
    report.note("llm.deadline_seconds", args.deadline)
    table = Table(
        title=f"hostile answers: worst of {runs} run(s) per shape, llm.deadline_seconds={args.deadline:g}"
    )
    for column in ("client", "shape", "way", "worst wall s", "worst RSS rise", "outcome"):
        table.add_column(column, justify="right" if "worst" in column else "left")
    failed = False
    for family, shape, way, variants in cases():
        results = [measure(family, shape, way, v, args.deadline) for v in variants for _ in range(runs)]
        seconds = max(float(str(r["seconds"])) for r in results)
        rise = max(int(str(r["rise"])) for r in results)
        outcomes = sorted({str(r["outcome"]).split(":")[0] for r in results})
        worst = max(results, key=lambda r: float(str(r["seconds"])))
        failed |= any(str(r["outcome"]) == "answered" for r in results)
        label = ", ".join(outcomes) + (f" ({len(variants)} variants)" if len(variants) > 1 else "")
        detail = str(worst["outcome"]).split(": ", 1)[-1][:70] if len(variants) == 1 else ""
        table.add_row(
            family, shape, way, f"{seconds:.2f}", f"{rise / 1e6:,.0f} MB", f"{label} {detail}".strip()
        )
        report.add(f"{family}/{shape}/{way}/worst wall", seconds * 1000)
        report.add(f"{family}/{shape}/{way}/worst rss rise", rise / 1e6, unit="MB")
    Console(width=200).print(table)
    report.save()
    if failed:
        print("FAILED: a hostile answer was taken for a reply", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
