"""``hygieia``, the command line: run, migrate, doctor, sessions, admin, bench."""

from __future__ import annotations


def main() -> None:
    """Entry point of the ``hygieia`` console script and of ``python -m gateway.cli``."""
    # Imported here, not at package level, so that importing a sibling (gateway.cli.common) does not
    # load every command and, through them, the whole service.
    from gateway.cli.app import main as run

    run()
