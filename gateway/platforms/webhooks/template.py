"""The payload-to-prompt template: ``{{ path.to.field }}`` substitutions, nothing executed.

A template is literal text with ``{{ ... }}`` holes. A hole names a field of the JSON payload by a
dotted path (``issue.title``, ``commits.0.message``, ``commits[0].message``) and may end in one
filter, ``| default("text")``, used when the field is missing or null. Special names start with
``$``: ``$event`` (the event header, GitHub's ``X-GitHub-Event``), ``$route``, ``$delivery``.

No expression, call, loop or attribute lookup on Python objects exists: a path walks JSON objects
and lists only, so a payload cannot make the template do anything but print its values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

_HOLE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_SEGMENT = r"(?:\$?[A-Za-z_][A-Za-z0-9_-]*|\d+)"
_PATH = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT}|\[\d+\])*")
_DEFAULT = re.compile(r'default\(\s*"((?:[^"\\]|\\.)*)"\s*\)')
MAX_VALUE_CHARS = 2000
"""An object or list printed whole is cut here: one hole never floods the prompt."""


class TemplateError(ValueError):
    """The template does not parse; the message names the hole."""


def missing_marker(path: str) -> str:
    """What a missing field without a default prints: visible, so the reader sees what was absent."""
    return f"<missing {path}>"


@dataclass(frozen=True, slots=True)
class _Hole:
    path: tuple[str, ...]
    spelled: str
    default: str | None


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: :meth:`render` fills it from a payload."""

    parts: tuple[str | _Hole, ...]

    def render(self, payload: object, specials: Mapping[str, str]) -> str:
        """The text for ``payload``; a missing field prints :func:`missing_marker` (or its default)."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            found, value = _lookup(payload, specials, part.path)
            if not found or value is None:
                if part.default is not None:
                    out.append(part.default)
                else:
                    out.append(missing_marker(part.spelled) if not found else "null")
                continue
            out.append(_printed(value))
        return "".join(out)


def parse_template(text: str) -> Template:
    """Parse ``text``; :class:`TemplateError` naming the first bad hole."""
    parts: list[str | _Hole] = []
    at = 0
    for match in _HOLE.finditer(text):
        parts.append(text[at : match.start()])
        parts.append(_hole(match.group(1)))
        at = match.end()
    rest = text[at:]
    if "{{" in rest:
        raise TemplateError(f"an unclosed '{{{{' near {rest[rest.index('{{') :][:30]!r}")
    parts.append(rest)
    return Template(tuple(p for p in parts if p != ""))


def _hole(inner: str) -> _Hole:
    spelled, bar, filt = inner.partition("|")
    spelled = spelled.strip()
    if not _PATH.fullmatch(spelled):
        raise TemplateError(
            f"{{{{{inner}}}}}: {spelled!r} is not a field path (letters, digits, '_', '-', dots, [0])"
        )
    default = None
    if bar:
        found = _DEFAULT.fullmatch(filt.strip())
        if found is None:
            raise TemplateError(f'{{{{{inner}}}}}: the only filter is default("text")')
        default = re.sub(r"\\(.)", r"\1", found.group(1))
    path = tuple(re.findall(r"\$?[A-Za-z_][A-Za-z0-9_-]*|\d+", spelled))
    return _Hole(path, spelled, default)


def _lookup(payload: object, specials: Mapping[str, str], path: tuple[str, ...]) -> tuple[bool, object]:
    head = path[0]
    if head.startswith("$"):
        if head[1:] not in specials or len(path) > 1:
            return False, None
        return True, specials[head[1:]]
    value: object = payload
    for step in path:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return False, None
    return True, value


def _printed(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "…"
