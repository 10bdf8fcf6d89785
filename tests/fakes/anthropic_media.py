"""Image and document blocks checked as the Messages API checks them (for the fake server).

Images: ``source.type`` base64 (or url), ``media_type`` one of JPEG/PNG/GIF/WebP and matching
the bytes, valid base64, at most 5 MB of base64, at most 8000 px a side (2000 px when a request
has more than 20 images), at most 100 images a request, and only in user turns. Documents:
base64 PDFs (``%PDF``) or plain text sources.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Iterator
from typing import Any

from PIL import Image, UnidentifiedImageError

IMAGE_TYPES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/gif": "GIF", "image/webp": "WEBP"}
MAX_IMAGE_B64 = 5 * 1024 * 1024
MAX_EDGE, MAX_EDGE_MANY, MANY, MAX_IMAGES = 8000, 2000, 20, 100


def _blocks(messages: list[Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, role, block) for every block, tool results' inner blocks included."""
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            yield f"messages.{i}.content.{j}", str(message.get("role")), block
            inner = block.get("content")
            if block.get("type") == "tool_result" and isinstance(inner, list):
                for k, sub in enumerate(inner):
                    if isinstance(sub, dict):
                        yield f"messages.{i}.content.{j}.content.{k}", str(message.get("role")), sub


def _decode(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def media_problems(messages: list[Any]) -> list[str]:
    """What the API would refuse about the images and documents of ``messages``."""
    problems: list[str] = []
    sizes: list[tuple[str, int, int]] = []
    for where, role, block in _blocks(messages):
        kind = block.get("type")
        if kind not in ("image", "document"):
            continue
        if role != "user":
            problems.append(f"{where}: {kind} content is only allowed in user messages")
            continue
        source = block.get("source")
        if not isinstance(source, dict):
            problems.append(f"{where}.source: Field required")
            continue
        if kind == "image":
            problems.extend(_image_problem(where, source, sizes))
        else:
            problems.extend(_document_problem(where, source))
    if len(sizes) > MAX_IMAGES:
        problems.append(f"messages: too many images in one request ({len(sizes)} > {MAX_IMAGES})")
    if len(sizes) > MANY:
        problems.extend(
            f"{where}: image dimensions exceed max allowed size for many-image requests: {MAX_EDGE_MANY} px"
            for where, w, h in sizes
            if max(w, h) > MAX_EDGE_MANY
        )
    return problems


def _image_problem(where: str, source: dict[str, Any], sizes: list[tuple[str, int, int]]) -> list[str]:
    if source.get("type") == "url":
        return []
    media_type = source.get("media_type")
    if source.get("type") != "base64" or media_type not in IMAGE_TYPES:
        return [
            f"{where}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' "
            "or 'image/webp'"
        ]
    data = source.get("data")
    raw = _decode(data)
    if raw is None:
        return [f"{where}.source.data: invalid base64 data"]
    if isinstance(data, str) and len(data) > MAX_IMAGE_B64:
        return [
            f"{where}.source.base64: image exceeds 5 MB maximum: {len(data)} bytes > {MAX_IMAGE_B64} bytes"
        ]
    try:
        image = Image.open(io.BytesIO(raw))
    except (UnidentifiedImageError, OSError):
        return [f"{where}.source.base64.data: The image was specified using the image/... media type, "
                "but the data is not a valid image"]  # fmt: skip
    if image.format != IMAGE_TYPES[str(media_type)]:
        return [f"{where}: Image does not match the provided media type {media_type}"]
    width, height = image.size
    if max(width, height) > MAX_EDGE:
        return [f"{where}: image dimensions exceed max allowed size: {MAX_EDGE} pixels"]
    sizes.append((where, width, height))
    return []


def _document_problem(where: str, source: dict[str, Any]) -> list[str]:
    if source.get("type") == "text":
        return [] if isinstance(source.get("data"), str) else [f"{where}.source.data: Field required"]
    if source.get("type") != "base64" or source.get("media_type") != "application/pdf":
        return [f"{where}.source.media_type: Input should be 'application/pdf'"]
    raw = _decode(source.get("data"))
    if raw is None:
        return [f"{where}.source.data: invalid base64 data"]
    if not raw.startswith(b"%PDF"):
        return [f"{where}.source: The PDF specified was not valid."]
    return []
