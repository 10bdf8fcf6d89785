"""Characters a reader cannot see, stripped from text that comes from outside (tool output).

Unicode tag characters (U+E0000-E007F) spell hidden instructions a model reads and a person does
not: a known prompt-injection carrier. Bidi overrides, zero-width spaces, the BOM and C0/C1
control characters (other than tab, newline and carriage return) hide or reorder text the same
way. The zero-width joiner and non-joiner stay: emoji sequences and some scripts need them.
"""

from __future__ import annotations

import re

_INVISIBLE = re.compile(
    "["
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # control characters but tab, newline, carriage return
    "\u00ad\u061c\u180e"  # soft hyphen, Arabic letter mark, Mongolian vowel separator
    "\u200b\u200e\u200f"  # zero-width space, left-to-right and right-to-left marks
    "\u202a-\u202e"  # bidi embeddings and overrides
    "\u2060-\u206f"  # word joiner, invisible operators, bidi isolates, deprecated format controls
    "\ufeff\ufff9-\ufffb"  # byte order mark, interlinear annotation
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"  # shorthand format controls, musical format controls
    "\U000e0000-\U000e007f"  # tag characters
    "]+"
)


def strip_invisible(text: str) -> str:
    """``text`` without invisible control and format characters (see the module docstring)."""
    return _INVISIBLE.sub("", text)
