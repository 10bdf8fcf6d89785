"""Relevance scores count a term as whole words, as the index matched it."""

from __future__ import annotations

from gateway.store.search_query import parse
from gateway.store.search_rank import Candidate, rank


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
