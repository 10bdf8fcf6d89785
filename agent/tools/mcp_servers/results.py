"""An MCP tool result as our :class:`ToolOutput`, and every way a call can fail as one error shape.

This is the one place that reads the SDK's result and error types: nothing above it parses a
library's message text. Text is stripped of invisible characters; an image within the API's
media limits becomes an image block, anything else a one-line note of what was left out.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp_types as types

from agent.tools.base import ToolOutput
from agent.tools.invisible import strip_invisible
from agent.types import ContentBlock

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
MAX_IMAGE_B64 = 5 * 1024 * 1024
"""The API's limit on one image (base64 characters), the same the chat's own pictures meet."""
MAX_IMAGES = 20


def unavailable(server: str, reason: str) -> ToolOutput:
    """The tool error the model reads when a server cannot answer a call."""
    return ToolOutput.error(f"server {server} is unavailable: {strip_invisible(reason)}")


def failed(server: str, tool: str, reason: str) -> ToolOutput:
    """The tool error the model reads when a server answered, but not with a result."""
    return ToolOutput.error(f"the {tool} tool of server {server} failed: {strip_invisible(reason)}")


def as_output(result: types.CallToolResult) -> ToolOutput:
    """The model's view of one result: its text (and structured content when there is no text),
    its images as image blocks."""
    parts: list[str] = []
    media: list[ContentBlock] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            image, note = _image(block)
            if image is not None and len(media) < MAX_IMAGES:
                media.append(image)
            else:
                parts.append(note or "[an image beyond the per-result limit was left out]")
        elif isinstance(block, types.AudioContent):
            parts.append(f"[audio ({block.mime_type}) left out: the model cannot hear it]")
        elif isinstance(block, types.EmbeddedResource):
            parts.append(_resource(block.resource))
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.name}: {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(_json(result.structured_content))
    text = strip_invisible("\n".join(p for p in parts if p))
    return ToolOutput(text=text, is_error=bool(result.is_error), media=tuple(media))


def _image(block: types.ImageContent) -> tuple[ContentBlock | None, str | None]:
    mime = block.mime_type.lower()
    if mime not in IMAGE_TYPES:
        return None, f"[an image of type {mime} was left out: the model reads JPEG, PNG, GIF and WebP]"
    if len(block.data) > MAX_IMAGE_B64:
        return None, f"[an image of {len(block.data) * 3 // 4} bytes was left out: over the 5 MB limit]"
    try:
        base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        return None, "[an image with invalid base64 data was left out]"
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": block.data}}, None


def _resource(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    if isinstance(resource, types.TextResourceContents):
        return resource.text
    kind = resource.mime_type or "binary"
    return f"[resource {resource.uri} ({kind}, {len(resource.blob) * 3 // 4} bytes) left out]"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)
