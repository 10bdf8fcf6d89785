"""Mutated pictures and PDFs: whatever the bytes, reading them raises nothing but MediaError.

Seeded mutations of one small file per format (PNG, JPEG, GIF, WebP, PDF): bytes flipped,
set to edge values, inserted, deleted, chunks repeated, the file cut short. The reduced run
tries a few hundred files; ``-m full`` tries thousands.
"""

from __future__ import annotations

import contextlib
import io
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from PIL import Image

from gateway.errors import MediaError
from gateway.serving.media import prepare_image, prepare_pdf
from tests.media_files import pdf, picture

EDGE_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)


def animated_gif() -> bytes:
    # Seeded noise, not Image.effect_noise (C rand(), unseeded): the GIF's length steers every
    # later mutation, so one unseeded byte made the "same seed" cases differ between runs.
    noise = random.Random(40)
    frames = [Image.frombytes("L", (40, 30), noise.randbytes(40 * 30)).convert("P") for _ in range(3)]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:], duration=80, loop=0)
    return out.getvalue()


def seeds() -> dict[str, bytes]:
    return {
        "png": picture(48, 32, fmt="PNG"),
        "jpeg": picture(48, 32, fmt="JPEG"),
        "gif": animated_gif(),
        "webp": picture(48, 32, fmt="WEBP"),
        "pdf": pdf(["Fuzzed text on page one", "and on page two"]),
    }


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four random edits of ``data``."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        at = rng.randrange(len(out)) if out else 0
        if op == 0 and out:
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1 and out:
            out[at] = rng.choice(EDGE_BYTES)
        elif op == 2:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3 and out:
            del out[at : at + rng.randint(1, 16)]
        elif op == 4 and out:
            piece = out[at : at + rng.randint(1, 64)]
            out[at:at] = piece * rng.randint(1, 4)
        elif out:
            del out[rng.randrange(len(out)) :]
    return bytes(out)


def readers(kind: str) -> list[Callable[[bytes], object]]:
    if kind != "pdf":
        return [prepare_image]
    return [
        lambda d: prepare_pdf(d, as_document=True, max_pages=100, max_chars=10_000),
        lambda d: prepare_pdf(d, as_document=False, max_pages=100, max_chars=10_000),
    ]


def cases(per_format: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """``per_format`` mutated files of each kind, the same for the same seed."""
    rng = random.Random(seed)
    for kind, data in seeds().items():
        for _ in range(per_format):
            yield kind, mutate(data, rng)


def fuzz(per_format: int, seed: int = 1913) -> tuple[int, Counter[str]]:
    """How many mutated files were read, and the exceptions other than MediaError that escaped."""
    escaped: Counter[str] = Counter()
    files = 0
    for kind, mutated in cases(per_format, seed):
        files += 1
        for read in readers(kind):
            try:
                read(mutated)
            except MediaError:
                pass
            except Exception as exc:  # what the test is looking for
                escaped[f"{kind}: {type(exc).__name__}"] += 1
    return files, escaped


def test_mutated_files_raise_nothing_but_media_error() -> None:
    files, escaped = fuzz(per_format=80)
    assert files == 400
    assert sum(escaped.values()) == 0, dict(escaped)


@pytest.mark.full
def test_mutated_files_raise_nothing_but_media_error_full_size() -> None:
    files, escaped = fuzz(per_format=2000, seed=7)
    assert files == 10_000
    assert sum(escaped.values()) == 0, dict(escaped)


def test_a_damaged_pdf_leaves_none_of_its_bytes_in_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    damaged = [data for kind, data in cases(per_format=80, seed=1913) if kind == "pdf"]
    for data in damaged[:40]:
        for read in readers("pdf"):
            with contextlib.suppress(MediaError):
                read(data)
    quoted = [r.getMessage()[:80] for r in caplog.records if r.name.startswith("pypdf")]
    assert quoted == []  # pypdf's warnings quote the file's bytes: what a user sent, in our logs
