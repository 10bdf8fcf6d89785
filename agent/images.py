"""What images and PDFs cost in tokens, by the API's own rules, read from the blocks themselves.

An image costs about ``width * height / 750`` tokens; the API scales anything larger than
about 1.15 megapixels (1568 px on the long edge) down first, so one image costs at most
:data:`MAX_IMAGE_TOKENS`. The size is read from the image header inside the base64 data
(PNG, JPEG, GIF, WebP), so no image library is needed here. A PDF costs its pages (each is
read as text and as an image): :data:`PDF_PAGE_TOKENS` per page.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
import struct

from agent.types import ContentBlock

MAX_IMAGE_TOKENS = 1600
PIXELS_PER_TOKEN = 750
PDF_PAGE_TOKENS = 2000
_HEADER_B64_CHARS = 96_000  # enough base64 to reach a JPEG's size marker behind its metadata
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def image_tokens(width: int, height: int) -> int:
    """The API's estimate for one image of ``width`` x ``height`` pixels."""
    return min(MAX_IMAGE_TOKENS, max(1, math.ceil(width * height / PIXELS_PER_TOKEN)))


def media_tokens(block: ContentBlock) -> int:
    """Tokens of an ``image`` or ``document`` block (0 for anything else)."""
    kind = block.get("type")
    source = block.get("source")
    data = source.get("data") if isinstance(source, dict) else None
    if kind == "image":
        size = image_size(data) if isinstance(data, str) else None
        return image_tokens(*size) if size else MAX_IMAGE_TOKENS
    if kind == "document":
        if isinstance(source, dict) and source.get("type") == "text":
            return math.ceil(len(str(source.get("data", ""))) / 4)
        return PDF_PAGE_TOKENS * (pdf_pages(data) if isinstance(data, str) else 1)
    return 0


@functools.lru_cache(maxsize=256)
def image_size(data: str) -> tuple[int, int] | None:
    """(width, height) from the header of base64 image data, or None when it cannot be read."""
    head = data[:_HEADER_B64_CHARS]
    try:
        raw = base64.b64decode(head[: len(head) - len(head) % 4], validate=False)
    except (binascii.Error, ValueError):
        return None
    return _png(raw) or _gif(raw) or _webp(raw) or _jpeg(raw)


@functools.lru_cache(maxsize=32)
def pdf_pages(data: str) -> int:
    """Pages of a base64 PDF (its page objects), at least 1."""
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return 1
    return max(1, len(_PDF_PAGE.findall(raw)))


def _png(raw: bytes) -> tuple[int, int] | None:
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return int(width), int(height)
    return None


def _gif(raw: bytes) -> tuple[int, int] | None:
    if raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return int(width), int(height)
    return None


def _webp(raw: bytes) -> tuple[int, int] | None:
    if raw[:4] != b"RIFF" or raw[8:12] != b"WEBP" or len(raw) < 30:
        return None
    chunk = raw[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", raw[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(raw[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(raw[24:27], "little") + 1, int.from_bytes(raw[27:30], "little") + 1
    return None


def _jpeg(raw: bytes) -> tuple[int, int] | None:
    if raw[:2] != b"\xff\xd8":
        return None
    index = 2
    while index + 9 < len(raw):
        if raw[index] != 0xFF:
            index += 1
            continue
        marker = raw[index + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            index += 1 if marker == 0xFF else 2
            continue
        length = int.from_bytes(raw[index + 2 : index + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            height, width = struct.unpack(">HH", raw[index + 5 : index + 9])
            return int(width), int(height)
        index += 2 + length
    return None
