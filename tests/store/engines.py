"""Which database engines the tests run on: SQLite always, PostgreSQL when configured."""

from __future__ import annotations

import os
from typing import Any

import pytest

POSTGRES_URL = os.environ.get("HYGIEIA_TEST_POSTGRES_URL") or None


def engine_params() -> list[Any]:
    """Params for the ``db_url`` fixture; PostgreSQL's carry the ``postgres`` mark."""
    params: list[Any] = [pytest.param("sqlite", id="sqlite")]
    if POSTGRES_URL:
        params.append(pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres))
    return params


def only(dialect: str) -> pytest.MarkDecorator:
    """Run a test that uses ``db_url`` (or ``store``) on one engine only."""
    chosen = [p for p in engine_params() if p.values[0] == dialect]
    return pytest.mark.parametrize("db_url", chosen, indirect=True)
