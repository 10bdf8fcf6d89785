"""What an upgrade would apply, in order (the migrate command's progress bar counts these)."""

from __future__ import annotations

from gateway.store.migrate import head_revision, pending_revisions


def test_an_empty_database_gets_every_revision_oldest_first() -> None:
    pending = pending_revisions(None)
    assert pending[0] == "0001_initial" and pending[-1] == head_revision()
    assert len(pending) == len(set(pending))


def test_a_database_at_head_has_nothing_pending() -> None:
    assert pending_revisions(head_revision()) == []


def test_from_the_first_revision_the_rest_are_pending() -> None:
    assert pending_revisions("0001_initial") == pending_revisions(None)[1:]
