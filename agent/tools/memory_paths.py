"""Path safety for the memory tool: every path must stay under ``/memories``.

The model's input is untrusted (it may echo text from anyone in the chat), so a path is
decoded until it stops changing (URL encoding, double encoding), folded with NFKC (so
look-alike dots and slashes count as what they look like), and refused if any form of
it holds a NUL, a control character, a backslash or a ``..`` segment, or if the
normalized result is not ``/memories`` or below it.
"""

from __future__ import annotations

import posixpath
import unicodedata
from urllib.parse import unquote

from agent.errors import ToolError

ROOT = "/memories"
MAX_PATH_CHARS = 512
_MAX_DECODE_ROUNDS = 4


def _check_chars(path: str, raw: str) -> None:
    if "\x00" in path:
        raise ToolError(f"path {raw!r} is refused: it contains a NUL byte")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ToolError(f"path {raw!r} is refused: it contains a control character")
    if "\\" in path:
        raise ToolError(f"path {raw!r} is refused: use '/' as the separator, never a backslash")
    if ".." in path.split("/"):
        raise ToolError(f"path {raw!r} is refused: '..' is not allowed in memory paths")


def normalize_memory_path(raw: str) -> str:
    """The canonical form of ``raw`` (``/memories`` or a path below it), or :class:`ToolError`."""
    if not raw:
        raise ToolError("path is empty: memory paths start with /memories")
    if len(raw) > MAX_PATH_CHARS:
        raise ToolError(f"path is longer than {MAX_PATH_CHARS} characters")
    path = raw
    for _ in range(_MAX_DECODE_ROUNDS):
        _check_chars(path, raw)
        try:
            decoded = unquote(path, errors="strict")
        except UnicodeDecodeError:
            raise ToolError(f"path {raw!r} is refused: it percent-encodes bytes that are not UTF-8") from None
        if decoded == path:
            break
        path = decoded
    else:
        raise ToolError(f"path {raw!r} is refused: it is percent-encoded too many times")
    _check_chars(path, raw)
    folded = unicodedata.normalize("NFKC", path)
    _check_chars(folded, raw)
    if not folded.startswith("/"):
        raise ToolError(f"path {raw!r} is refused: memory paths are absolute and start with {ROOT}")
    normalized = posixpath.normpath(folded)
    # normpath keeps a leading '//' (POSIX allows it to mean something else); we do not.
    normalized = "/" + normalized.lstrip("/")
    if normalized != ROOT and not normalized.startswith(ROOT + "/"):
        raise ToolError(f"path {raw!r} is refused: it is outside {ROOT}")
    if len(normalized) > MAX_PATH_CHARS:  # NFKC can lengthen a path many times over
        raise ToolError(f"path is longer than {MAX_PATH_CHARS} characters once normalized")
    return normalized
