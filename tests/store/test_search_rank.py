"""Relevance scores count a term as whole words, as the index matched it."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.store.search_query import ParsedQuery, parse
from gateway.store.search_rank import K1, B, Candidate, rank
from gateway.store.search_snippet import folded


def candidates(*texts: str) -> list[Candidate]:
    return [Candidate(i + 1, text, len(text)) for i, text in enumerate(texts)]


def test_a_word_inside_longer_words_does_not_count_as_the_word() -> None:
    twice = "ko and ko again"
    once = "ko saiko kokoro kodama"
    assert [cid for cid, _ in rank(candidates(twice, once), parse("ko"))] == [1, 2]


def test_a_phrase_counts_where_its_words_are_consecutive() -> None:
    apart = "red car and car red blue car"
    repeated = "the red car, a red car there"
    assert [cid for cid, _ in rank(candidates(repeated, apart), parse('"red car"'))] == [1, 2]


def test_a_prefix_counts_every_word_that_starts_with_it() -> None:
    many = "deploy deployed deploys now"
    one = "deploy went fine this time"
    assert [cid for cid, _ in rank(candidates(one, many), parse("depl*"))] == [2, 1]


def test_a_shorter_message_wins_a_tie_in_occurrences() -> None:
    short = "fig tree"
    long = "fig " + "filler " * 30
    assert [cid for cid, _ in rank(candidates(long, short), parse("fig"))] == [2, 1]


def test_a_word_repeated_back_to_back_counts_each_time() -> None:
    thrice = "ko ko ko and more"
    once = "ko and some more"
    assert [cid for cid, _ in rank(candidates(once, thrice), parse("ko"))] == [2, 1]


def test_a_word_repeated_with_one_space_between_counts_every_time() -> None:
    thrice = "ko ko ko and"
    twice = "ko ko or and"
    assert [cid for cid, _ in rank(candidates(twice, thrice), parse("ko"))] == [2, 1]


def test_a_phrase_counts_whatever_separators_stand_between_its_words() -> None:
    spaced = "red,  car -- red car"
    once = "red car and a blue"
    assert [cid for cid, _ in rank(candidates(once, spaced), parse('"red car"'))] == [2, 1]


def test_a_long_message_counts_are_extrapolated_from_the_scored_start() -> None:
    head = "ko " + "filler " * 20
    cut = Candidate(1, head, len(head) * 4)  # only the first quarter was read
    whole = Candidate(2, head * 4, len(head) * 4)
    assert [score for _, score in rank([cut], parse("ko"))] == [
        score for _, score in rank([whole], parse("ko"))
    ]


# ---- the counts in C agree with splitting every candidate into words ------------------------

_REF_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
_REF_SEPARATOR = re.compile(r"[\W_]+")


def _reference_rank(candidates: list[Candidate], parsed: ParsedQuery) -> list[tuple[int, float]]:
    """The ranking as first written: every separator doubled, counted in a ``str``."""

    def spaced(text: str, phrases: bool) -> tuple[str, int]:
        single = f" {text.translate(_REF_SEPARATORS) if text.isascii() else _REF_SEPARATOR.sub(' ', text)} "
        if phrases:
            words = single.split()
            return f" {'  '.join(words)} ", len(words)
        return single.replace(" ", "  "), max(single.count(" ") - single.count("  ") - 1, 1)

    def needle(literal: str, prefix: bool, cjk: bool) -> tuple[str, bool]:
        if cjk:
            return literal, True
        body = "  ".join(literal.split())
        return (f" {body}" if prefix else f" {body} "), False

    terms = parsed.positive
    needles = [needle(folded(t.literal), t.prefix, t.cjk) for t in terms]
    phrases = any(len(t.tokens) > 1 and not t.cjk for t in terms)
    texts = []
    for c in candidates:
        text = folded(c.text)
        text_spaced, words = spaced(text, phrases)
        scale = c.chars / len(c.text) if c.chars > len(c.text) > 0 else 1.0
        texts.append((c.id, text, text_spaced, scale, max(words * scale, 1.0)))
    avg = sum(t[4] for t in texts) / len(texts)
    scored = []
    for cid, text, text_spaced, scale, length in texts:
        norm = K1 * (1 - B + B * length / avg)
        score = 0.0
        for n, in_text in needles:
            tf = max(1.0, (text if in_text else text_spaced).count(n) * scale)
            score += tf * (K1 + 1) / (tf + norm)
        scored.append((cid, score))
    return sorted(scored, key=lambda s: (-s[1], -s[0]))


_WORDS = ["ko", "Ko", "KO", "kó", "saiko", "kokoro", "red", "car", "Straße", "strasse", "数据", "库", "ǅemal"]
_GLUE = [" ", "  ", "   ", ", ", " - ", "_", "\n", "...", "\u00a0", "、", "—"]
_texts = st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(_GLUE)), max_size=30).map(
    lambda parts: "".join(w + g for w, g in parts)
)
_queries = st.lists(
    st.tuples(st.sampled_from(_WORDS), st.sampled_from(["", "*"]), st.booleans()), min_size=1, max_size=3
).map(lambda terms: " ".join(f'"{w} {w}"' if phrase else w + star for w, star, phrase in terms))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_texts, st.integers(0, 3)), min_size=1, max_size=8), _queries)
def test_the_counts_in_c_rank_exactly_as_splitting_into_words_does(
    texts: list[tuple[str, int]], query: str
) -> None:
    cands = [Candidate(i + 1, text, len(text) * (1 + longer)) for i, (text, longer) in enumerate(texts)]
    parsed = parse(query)
    assert rank(cands, parsed) == _reference_rank(cands, parsed)
