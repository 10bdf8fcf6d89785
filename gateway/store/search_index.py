"""What the search index holds for a message: a bounded prefix of its text, CJK split apart.

Every message is stored whole; the index covers its first :data:`INDEX_CHARS` characters
on both engines (PostgreSQL cannot index a tsvector over 1 MB, and a bounded prefix keeps
every row's index entry, and its highlighting, cheap). Migration ``0003_search_index``
builds the index with the same numbers.

Three views of that prefix are indexed:

- **words** (SQLite FTS5 ``unicode61``, PostgreSQL ``to_tsvector('simple', ...)``);
- **CJK characters** one by one (``messages.search_cjk``, computed here when a row is
  written): Chinese, Japanese and Korean write words without spaces, so a word tokenizer
  sees a whole sentence as one word. Each CJK character becomes a token, and a CJK search
  term is the phrase of its characters — it matches wherever those characters stand
  side by side, as Lucene's CJK analyzers do;
- **trigrams** (SQLite FTS5 ``trigram``, PostgreSQL ``pg_trgm``), for substrings of three
  characters or more: part of a code identifier, the middle of a word.
"""

from __future__ import annotations

import re
import unicodedata

INDEX_CHARS = 65_536
"""Characters of ``messages.text`` the search index covers."""

CJK_INDEX_TOKENS = 16_000
"""CJK tokens indexed per message (PostgreSQL counts word positions up to 16,383)."""

CJK_RUN_SEPARATOR = "x"
"""A token between two runs of CJK characters, so a phrase never spans text that was not
side by side. Only CJK characters are ever searched in this column, so it never matches."""

_CJK_CLASS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005\u3007"  # 々 〇
    "\u3040-\u30ff"  # Hiragana, Katakana (with ー)
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # halfwidth Katakana
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_CJK_ONLY = re.compile(f"[{_CJK_CLASS}]+$")


def is_cjk(token: str) -> bool:
    """True when every character of ``token`` is a CJK character (and there is one)."""
    return _CJK_ONLY.match(token) is not None


def cjk_index_text(text: str) -> str | None:
    """``messages.search_cjk`` for ``text``: its CJK characters space-separated, runs apart.

    ``None`` when the indexed prefix holds no CJK character (most rows: nothing stored).
    """
    if text.isascii():
        # Most messages: no CJK character and nothing to normalize (a bulk load of a million
        # rows spent 3 s normalizing and scanning them).
        return None
    prefix = unicodedata.normalize("NFC", text[:INDEX_CHARS])
    tokens: list[str] = []
    for run in _CJK_RUN.findall(prefix):
        tokens.append(CJK_RUN_SEPARATOR)
        tokens.extend(run)
        if len(tokens) >= CJK_INDEX_TOKENS:
            break
    return " ".join(tokens[:CJK_INDEX_TOKENS]) if tokens else None


def search_values(text: str) -> dict[str, str | None]:
    """The searchable columns of a message row whose text is ``text``."""
    return {"text": text, "search_cjk": cjk_index_text(text)}
