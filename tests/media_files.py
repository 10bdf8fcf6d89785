"""Pictures and PDFs made on the spot for the media tests (no binary fixtures in the repository)."""

from __future__ import annotations

import io
import random
import struct
import zlib

from PIL import Image


def picture(width: int, height: int, *, fmt: str = "JPEG", mode: str = "RGB") -> bytes:
    """A noisy picture (so it does not compress to nothing) of the given size and format."""
    # Seeded, not Image.effect_noise (C rand(), unseeded): tests that mutate these bytes must see
    # the same file in every run and in every test order.
    noise = random.Random(width * 100_003 + height).randbytes(width * height)
    image = Image.frombytes("L", (width, height), noise).convert(mode)
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF whose pages show ``pages`` as text (Helvetica), built by hand."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 18 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * i} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def png_bomb(width: int, height: int) -> bytes:
    """A PNG of ``width`` x ``height`` RGBA pixels, all zero: a few hundred KB that decode to
    ``4 * width * height`` bytes (13,000 x 13,000 is 657 KB for 676 MB).

    Built without compressing all those zeros: after a full flush deflate forgets what it saw,
    so every further megabyte of zeros compresses to the same bytes, repeated here.
    """
    total = height * (1 + 4 * width)  # each row: filter byte 0, then the pixels
    block = 1 << 20
    full, rest = divmod(total, block)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(block)
    pieces = [packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH) for _ in range(min(full, 2))]
    body = b"".join(pieces[:1] + pieces[1:] * (full - 1))
    body += packer.compress(bytes(rest)) + packer.flush()
    adler = (total % 65521) << 16 | 1  # adler-32 of zeros: A stays 1, B grows by 1 a byte
    idat = b"\x78\xda" + body + struct.pack(">I", adler)
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
