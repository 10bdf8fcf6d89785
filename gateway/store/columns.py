"""Column types and value hygiene shared by the models and the repository."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer, MetaData, String
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

# A 64-bit id on PostgreSQL; plain INTEGER on SQLite so the column is a rowid alias
# (FTS5's content_rowid and AUTOINCREMENT-free inserts rely on that).
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Stores UTC and always returns aware UTC datetimes, on SQLite too.

    A naive datetime handed in is taken to be UTC already. SQLite keeps the value as a
    naive ISO string (so string order is time order); PostgreSQL as ``timestamptz``.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def clean_text(text: str) -> str:
    """``text`` storable everywhere: no NUL (PostgreSQL refuses it in text), no lone surrogate
    (not encodable as UTF-8; JSON from a platform can carry one), which becomes ``?``."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def clean_json(value: Any) -> Any:
    """A JSON-able value with NUL characters removed from every string, keys included."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def rows_changed(result: object) -> int:
    """How many rows an UPDATE or DELETE touched.

    ``execute`` is typed to return ``Result``, which has no ``rowcount``; the ``CursorResult`` an
    UPDATE or DELETE actually returns does. Read it here, once, instead of at every call site.
    """
    return int(getattr(result, "rowcount", 0) or 0)


NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ID = String(32)
"""uuid4().hex ids (sessions, compactions)."""

Json = JSON(none_as_null=True)


class SchemaBase(DeclarativeBase):
    """The declarative base of every model (``gateway.store.models``), with its naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
