"""Every relative link in the docs resolves: the file exists inside the repository, and a ``#anchor``
names a heading of the target as GitHub renders it (the same slugs, ``-1`` for a repeated one)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "bench" / "README.md",
        ROOT / "docker" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
)
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


def _prose_lines(text: str, *, blank_code: bool = True) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code spans blanked out unless told."""
    out: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(
                (
                    number,
                    re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line) if blank_code else line,
                )
            )
    return out


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: markup dropped, lower case, punctuation removed, spaces
    to hyphens (letters, digits, ``-`` and ``_`` of any script kept)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # emphasis underscores, not snake_case
    kept = "".join(ch for ch in text.lower() if ch in " -_" or unicodedata.category(ch)[0] in ("L", "N", "M"))
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file offers: its headings' slugs (repeats numbered) and HTML anchors."""
    text = path.read_text(encoding="utf-8")
    found: set[str] = set(HTML_ANCHOR.findall(text))
    counts: dict[str, int] = {}
    for _, line in _prose_lines(text, blank_code=False):  # code spans are heading text too
        match = HEADING.match(line)
        if match is None:
            continue
        slug = github_slug(match.group(2))
        seen = counts.get(slug, 0)
        found.add(slug if seen == 0 else f"{slug}-{seen}")
        counts[slug] = seen + 1
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link and image in the file's prose."""
    out: list[tuple[int, str]] = []
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        out.extend((number, target) for target in INLINE_LINK.findall(line))
        reference = REFERENCE_LINK.match(line)
        if reference:
            out.append((number, reference.group(1)))
    return out


def broken_links(path: Path) -> list[str]:
    problems: list[str] = []
    for number, target in links(path):
        if SCHEME.match(target):
            continue  # a web address: not this test's business
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / unquote(file_part)).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not resolved.is_relative_to(ROOT):
            problems.append(f"{where}: points outside the repository")
        elif not resolved.exists():
            problems.append(f"{where}: no such file")
        elif anchor and resolved.suffix == ".md" and unquote(anchor) not in anchors(resolved):
            problems.append(f"{where}: no heading with the anchor #{anchor}")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    assert broken_links(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_sends_the_reader_outside_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert "../shared/" not in text, f"{doc.relative_to(ROOT)} names a file outside the repository"


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Trying it by hand, offline", "trying-it-by-hand-offline"),
        ("1. Start the fakes", "1-start-the-fakes"),
        ("`hygieia run` and `--role`", "hygieia-run-and---role"),
        ("Scale-out: PostgreSQL & workers", "scale-out-postgresql--workers"),
        ("What a [chat](docs/chat.md) user sees", "what-a-chat-user-sees"),
        ("max_tokens_per_turn (why)", "max_tokens_per_turn-why"),
        ("Überblick — Ähnlichkeit", "überblick--ähnlichkeit"),
    ],
)
def test_slugs_are_githubs(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_the_checker_reports_a_missing_file_and_a_missing_anchor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "a.md").write_text("# Title\n\n## Part two\n", encoding="utf-8")
    doc = tmp_path / "b.md"
    doc.write_text(
        "[ok](a.md#part-two) [gone](missing.md) [bad anchor](a.md#part-three) [self](#here)\n"
        "`[in code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n## Here\n[out](../elsewhere.md)\n",
        encoding="utf-8",
    )
    (tmp_path.parent / "elsewhere.md").write_text("x", encoding="utf-8")

    problems = broken_links(doc)

    assert problems == [
        "b.md:1: missing.md: no such file",
        "b.md:1: a.md#part-three: no heading with the anchor #part-three",
        "b.md:7: ../elsewhere.md: points outside the repository",
    ]
