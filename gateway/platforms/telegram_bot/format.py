"""Markdown-ish model output -> Telegram HTML (parse_mode="HTML").

Supported: ``**bold**``/``__bold__``, ``*italic*``/``_italic_``, ``~~strike~~``, ```` `code` ````,
fenced code blocks (```` ```lang ```` -> ``<pre><code class="language-lang">``), ``[text](url)``
and ``# headings`` (rendered bold). Only ``<``, ``>`` and ``&`` are escaped in text.

Tags come only from matched pairs resolved on a stack, so the output is always properly
nested: an unmatched or crossing delimiter stays as literal (escaped) text. The visible text
is never longer than the input, so a part within the limit stays within it once formatted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gateway.splitter import Fence, next_fence_state

_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$")
_LANG = re.compile(r"^[\w#+.-]{1,32}$")
_LINK_URL = re.compile(r"\(((?:https?|tg|mailto):[^\s()<>]+)\)")
_TAGS = {"**": "b", "__": "b", "*": "i", "_": "i", "~~": "s"}


def escape(text: str) -> str:
    """Escape the three characters Telegram's HTML parser reserves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_telegram_html(text: str) -> str:
    """Convert model output to Telegram HTML; never produces unbalanced tags."""
    out: list[str] = []
    for block in _blocks(text):
        if block.fence is None:
            out.append(_render_prose(block.text))
        else:
            out.append(_render_pre(block))
    return "".join(out)


def _lines(text: str) -> list[str]:
    """Lines ended by "\\n" only, as :mod:`gateway.fences` reads them (``str.splitlines`` would
    also end one at \\x1e or U+2028 and find a fence the splitter does not see)."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


@dataclass(frozen=True, slots=True)
class _Block:
    """Prose (``fence`` None) or a fenced block: its content and, verbatim, its fence lines too."""

    text: str
    fence: Fence | None = None
    raw: str = ""


def _blocks(text: str) -> list[_Block]:
    """Split into prose and fenced blocks, keeping every newline."""
    blocks: list[_Block] = []
    state: Fence | None = None
    prose: list[str] = []
    code: list[str] = []
    raw: list[str] = []
    for line in _lines(text):
        bare = line.rstrip("\r\n")
        new_state = next_fence_state(state, bare)
        if state is None and new_state is not None:
            if prose:
                blocks.append(_Block("".join(prose)))
                prose = []
            raw = [line]
        elif state is not None and new_state is None:
            raw.append(bare)
            blocks.append(_Block("".join(code), state, "".join(raw)))
            code = []
            if line.endswith("\n"):
                prose.append("\n")
        elif state is not None:
            code.append(line)
            raw.append(line)
        else:
            prose.append(line)
        state = new_state
    if state is not None:
        blocks.append(_Block("".join(code), state, "".join(raw)))
    if prose:
        blocks.append(_Block("".join(prose)))
    return blocks


def _render_pre(block: _Block) -> str:
    body = escape(block.text.rstrip("\r\n"))
    if not body.strip():
        # Fences around nothing are no code block: show them as written (a run of backticks
        # explaining Markdown, a reply cut just after its opener), never as an empty message.
        return escape(block.raw)
    fence = block.fence
    info = fence.line.strip().lstrip("`~").strip().split() if fence is not None else []
    if info and _LANG.match(info[0]):
        return f'<pre><code class="language-{escape(info[0])}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _render_prose(text: str) -> str:
    out: list[str] = []
    run: list[str] = []
    for line in _lines(text):
        m = _HEADING.match(line.rstrip("\r\n"))
        if m is None:
            run.append(line)
            continue
        if run:
            out.append(_render_inline("".join(run)))
            run = []
        newline = line[len(line.rstrip("\r\n")) :]
        out.append(_render_nodes([_Element("b", _parse_inline(m.group(1)))]) + newline)
    if run:
        out.append(_render_inline("".join(run)))
    return "".join(out)


# --- inline: tokens -> stack-resolved tree -> HTML ------------------------------------------


@dataclass(slots=True)
class _Text:
    text: str


@dataclass(slots=True)
class _Code:
    text: str


@dataclass(slots=True)
class _Delim:
    """An emphasis delimiter that may still be matched; rendered literally if never matched."""

    text: str
    can_open: bool
    can_close: bool
    run: int = 0


@dataclass(slots=True)
class _Element:
    tag: str
    children: list[_Node] = field(default_factory=list)
    href: str | None = None


_Node = _Text | _Code | _Delim | _Element


def _render_inline(text: str) -> str:
    return _render_nodes(_parse_inline(text))


def _parse_inline(text: str, *, links: bool = True) -> list[_Node]:
    return _resolve(_tokenize(text, links=links))


def _tokenize(text: str, *, links: bool) -> list[_Node]:
    tokens: list[_Node] = []
    plain: list[str] = []
    i = 0
    n = len(text)

    def flush() -> None:
        if plain:
            tokens.append(_Text("".join(plain)))
            plain.clear()

    while i < n:
        ch = text[i]
        if ch == "`":
            j = i
            while j < n and text[j] == "`":
                j += 1
            ticks = text[i:j]
            end = _find_backtick_run(text, j, len(ticks))
            if end >= 0 and text[j:end].strip():
                flush()
                content = text[j:end]
                if content.startswith(" ") and content.endswith(" ") and content.strip():
                    content = content[1:-1]
                tokens.append(_Code(content))
                i = end + len(ticks)
            else:
                plain.append(ticks)
                i = j
            continue
        if ch == "[" and links:
            link = _match_link(text, i)
            if link is not None:
                flush()
                label, url, i = link
                tokens.append(_Element("a", _parse_inline(label, links=False), href=url))
                continue
        if ch in "*_~":
            j = i
            while j < n and text[j] == ch:
                j += 1
            run = text[i:j]
            pieces = _delimiter_pieces(run)
            if pieces is None:
                plain.append(run)
            else:
                flush()
                before = text[i - 1] if i > 0 else " "
                after = text[j] if j < n else " "
                can_open = not after.isspace()
                can_close = not before.isspace()
                if ch == "_":  # no intraword underscores: snake_case stays as it is
                    can_open = can_open and not before.isalnum()
                    can_close = can_close and not after.isalnum()
                elif before.isalnum() and after.isalnum():  # 2*3*4 is arithmetic, not emphasis
                    can_open = can_close = False
                tokens.extend(_Delim(p, can_open, can_close, run=i) for p in pieces)
            i = j
            continue
        plain.append(ch)
        i += 1
    flush()
    return tokens


def _find_backtick_run(text: str, start: int, length: int) -> int:
    """Index of the next run of exactly ``length`` backticks at or after ``start``, or -1."""
    i = start
    while True:
        i = text.find("`" * length, i)
        if i < 0:
            return -1
        j = i + length
        if (i == 0 or text[i - 1] != "`") and (j >= len(text) or text[j] != "`"):
            return i
        while j < len(text) and text[j] == "`":
            j += 1
        i = j


def _match_link(text: str, i: int) -> tuple[str, str, int] | None:
    """``[label](url)`` at ``i``: (label, url, index after it), or None."""
    close = text.find("]", i + 1)
    if close < 0 or "[" in text[i + 1 : close] or not text[i + 1 : close].strip():
        return None
    m = _LINK_URL.match(text, close + 1)
    if m is None:
        return None
    return text[i + 1 : close], m.group(1), m.end()


def _delimiter_pieces(run: str) -> list[str] | None:
    if run[0] == "~":
        return ["~~"] if run == "~~" else None
    if len(run) == 1:
        return [run]
    if len(run) == 2:
        return [run]
    if len(run) == 3:
        return [run[:2], run[0]]
    return None


def _resolve(tokens: list[_Node]) -> list[_Node]:
    """Match delimiters innermost-first on a stack; unmatched ones stay literal."""
    out: list[_Node] = []
    openers: list[int] = []  # indexes in ``out`` of delimiters that may open
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not isinstance(tok, _Delim):
            out.append(tok)
            i += 1
            continue
        group = [tok]  # the pieces of one run ("***" -> "**", "*") close in stack order
        while i + len(group) < len(tokens):
            nxt = tokens[i + len(group)]
            if not (isinstance(nxt, _Delim) and nxt.run == tok.run):
                break
            group.append(nxt)
        i += len(group)
        while tok.can_close and group and _close_innermost(out, openers, group):
            pass
        for piece in group:
            if piece.can_open:
                openers.append(len(out))
            out.append(piece)
    return out


def _close_innermost(out: list[_Node], openers: list[int], group: list[_Delim]) -> bool:
    """Close the innermost opener that one of ``group`` matches; False when none does."""
    for k in range(len(openers) - 1, -1, -1):
        start = openers[k]
        opener = out[start]
        piece = next((p for p in group if _same(opener, p)), None)
        if piece is None:
            continue
        if start == len(out) - 1:
            return False  # nothing between: leave both literal rather than emit an empty entity
        group.remove(piece)
        del openers[k:]
        element = _Element(_TAGS[piece.text], out[start + 1 :])
        del out[start:]
        out.append(element)
        return True
    return False


def _same(node: _Node, tok: _Delim) -> bool:
    return isinstance(node, _Delim) and node.text == tok.text


def _render_nodes(nodes: list[_Node], open_tags: frozenset[str] = frozenset()) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, _Text | _Delim):
            parts.append(escape(node.text))
        elif isinstance(node, _Code):
            parts.append(f"<code>{escape(node.text)}</code>")
        else:
            inner = _render_nodes(node.children, open_tags | {node.tag})
            if node.tag in open_tags:
                parts.append(inner)  # Telegram does not nest an entity inside the same kind
            elif node.tag == "a" and node.href is not None:
                href = escape(node.href).replace('"', "&quot;")
                parts.append(f'<a href="{href}">{inner}</a>')
            else:
                parts.append(f"<{node.tag}>{inner}</{node.tag}>")
    return "".join(parts)
