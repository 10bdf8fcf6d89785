"""Telegram's HTML parse mode, as the Bot API applies it to ``sendMessage(parse_mode="HTML")``.

Strict on purpose: unknown tags, crossing or unclosed tags, tags inside ``code``/``pre`` and
stray ``<``/``&`` are all "can't parse entities" errors, so a formatter that passes here is
safe against the real server. Entity offsets and lengths are in UTF-16 code units.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

_TAG = re.compile(
    r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>\"']+))*)\s*>"
)
_ATTR = re.compile(r"([a-zA-Z-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>\"']+))")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d{1,7}|#x[0-9a-fA-F]{1,6});")
_KINDS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}


class EntityParseError(ValueError):
    """The text cannot be parsed; ``str(exc)`` is what the API puts after "can't parse entities: "."""


@dataclass(slots=True)
class _Open:
    tag: str
    attrs: dict[str, str]
    offset: int
    byte: int


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Return (plain text, entities) or raise :class:`EntityParseError`."""
    plain: list[str] = []
    units = 0
    stack: list[_Open] = []
    entities: list[dict[str, Any]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        byte = len(text[:i].encode())
        if ch == "<":
            m = _TAG.match(text, i)
            if m is None:
                raise EntityParseError(f"Unsupported start tag at byte offset {byte}")
            closing, tag, attr_text = m.group(1) == "/", m.group(2).lower(), m.group(3)
            if tag not in _KINDS:
                raise EntityParseError(f'Unsupported start tag "{tag}" at byte offset {byte}')
            if closing:
                if not stack or stack[-1].tag != tag:
                    raise EntityParseError(f'Unmatched end tag at byte offset {byte}, expected "</{tag}>"')
                opened = stack.pop()
                entity = _entity(opened, units, stack)
                if entity is not None:
                    entities.append(entity)
            else:
                if (
                    stack
                    and stack[-1].tag in ("code", "pre")
                    and not (stack[-1].tag == "pre" and tag == "code")
                ):
                    raise EntityParseError(f'Unsupported nested tag "{tag}" at byte offset {byte}')
                attrs = {
                    a.group(1).lower(): a.group(2) or a.group(3) or a.group(4) or ""
                    for a in _ATTR.finditer(attr_text)
                }
                attrs = {k: html.unescape(v) for k, v in attrs.items()}
                if tag == "span" and attrs.get("class") != "tg-spoiler":
                    raise EntityParseError(f'Tag "span" must have class "tg-spoiler" at byte offset {byte}')
                stack.append(_Open(tag, attrs, units, byte))
            i = m.end()
            continue
        if ch == "&":
            m = _ENTITY.match(text, i)
            if m is None:
                raise EntityParseError(f"Unsupported HTML entity at byte offset {byte}")
            decoded = html.unescape(m.group(0))
            plain.append(decoded)
            units += utf16_units(decoded)
            i = m.end()
            continue
        if ch == ">":
            raise EntityParseError(f"Unexpected '>' at byte offset {byte}")
        plain.append(ch)
        units += utf16_units(ch)
        i += 1
    if stack:
        raise EntityParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1].tag}"')
    return "".join(plain), sorted(entities, key=lambda e: (e["offset"], -e["length"]))


def _entity(opened: _Open, end: int, stack: list[_Open]) -> dict[str, Any] | None:
    length = end - opened.offset
    if length == 0:
        return None  # Telegram drops empty entities
    kind = _KINDS[opened.tag]
    entity: dict[str, Any] = {"type": kind, "offset": opened.offset, "length": length}
    if kind == "text_link":
        url = opened.attrs.get("href", "")
        if not url:
            raise EntityParseError(f"Can't find href of the link at byte offset {opened.byte}")
        entity["url"] = url
    if kind == "code" and stack and stack[-1].tag == "pre":
        language = opened.attrs.get("class", "")
        if language.startswith("language-"):
            stack[-1].attrs["language"] = language[len("language-") :]
        return None
    if kind == "pre" and opened.attrs.get("language"):
        entity["language"] = opened.attrs["language"]
    return entity
