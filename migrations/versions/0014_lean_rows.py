"""Lean rows: a plain message's text stored once, a trigram index without positions.

- ``messages.content`` may be NULL: a message whose content is one plain text block (most
  of them) keeps that text in ``text`` only, instead of a second time inside the JSON
  (``gateway.store.convert.stored_content``). Existing rows are rewritten so. On SQLite the
  NOT NULL constraint is dropped by editing the table's definition, the procedure SQLite
  documents for removing a NOT NULL constraint (the rows on disk do not change), so a big
  database is not copied; the freed pages are reused by new rows (``VACUUM`` returns them).
- SQLite's ``messages_fts_trgm`` is rebuilt with ``detail=none``: it keeps which rows hold a
  trigram, not where, a third of its size. The substring tier then looks up rows holding
  every trigram of a term and checks the text itself (``gateway.store.search_sql``).
- SQLite's ``messages_fts`` keeps prefix indexes for 2 and 3 characters, not 4: a longer prefix
  matches few enough words to merge them at query time, and the fourth index cost a fifth of
  the table and of its build.

Revision ID: 0014_lean_rows
Revises: 0013_ratelimits
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014_lean_rows"
down_revision: str | Sequence[str] | None = "0013_ratelimits"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SOURCE = "content='messages_fts_source', content_rowid='id'"
_TRGM_FULL = f"CREATE VIRTUAL TABLE messages_fts_trgm USING fts5(text, {_SOURCE}, tokenize='trigram')"
_TRGM_LEAN = f"{_TRGM_FULL[:-1]}, detail=none)"
_WORDS = (
    f"CREATE VIRTUAL TABLE messages_fts USING fts5(text, cjk, {_SOURCE}, "
    "tokenize='unicode61 remove_diacritics 2', prefix='{}')"
)

_SQLITE_PLAIN = """
    content IS NOT NULL AND json_valid(content) AND json_type(content) = 'array'
    AND json_array_length(content) = 1 AND json_type(content, '$[0]') = 'object'
    AND json_type(content, '$[0].type') = 'text' AND json_extract(content, '$[0].type') = 'text'
    AND json_type(content, '$[0].text') = 'text' AND json_extract(content, '$[0].text') = text
    AND (SELECT count(*) FROM json_each(content, '$[0]')) = 2
"""
_POSTGRES_PLAIN = """
    content IS NOT NULL AND json_typeof(content) = 'array' AND json_array_length(content) = 1
    AND json_typeof(content -> 0) = 'object' AND json_typeof(content -> 0 -> 'text') = 'string'
    AND content -> 0 ->> 'type' = 'text' AND content -> 0 ->> 'text' = text
    AND (SELECT count(*) FROM json_object_keys(content -> 0)) = 2
"""


def _sqlite_content_constraint(old: str, new: str) -> None:
    """Swap the ``content`` column's declaration in the table's stored definition."""
    bind = op.get_bind()
    where = "WHERE type = 'table' AND name = 'messages'"
    sql = str(bind.exec_driver_sql(f"SELECT sql FROM sqlite_master {where}").scalar())
    if old not in sql:
        raise RuntimeError(f"messages is not as revision 0013 left it: no {old!r} in its definition")
    version = int(bind.exec_driver_sql("PRAGMA schema_version").scalar() or 0)
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    bind.exec_driver_sql(f"UPDATE sqlite_master SET sql = ? {where}", (sql.replace(old, new, 1),))
    bind.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def _sqlite_fts(name: str, definition: str) -> None:
    op.execute(f"DROP TABLE {name}")
    op.execute(definition)
    op.execute(f"INSERT INTO {name}({name}) VALUES ('rebuild')")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _sqlite_content_constraint("content JSON NOT NULL,", "content JSON,")
        op.execute(f"UPDATE messages SET content = NULL WHERE {_SQLITE_PLAIN}")
        _sqlite_fts("messages_fts_trgm", _TRGM_LEAN)
        _sqlite_fts("messages_fts", _WORDS.format("2 3"))
    else:
        op.alter_column("messages", "content", nullable=True)
        op.execute(f"UPDATE messages SET content = NULL WHERE {_POSTGRES_PLAIN}")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute(
            "UPDATE messages SET content = json_array(json_object('type', 'text', 'text', text))"
            " WHERE content IS NULL"
        )
        _sqlite_content_constraint("content JSON,", "content JSON NOT NULL,")
        _sqlite_fts("messages_fts_trgm", _TRGM_FULL)
        _sqlite_fts("messages_fts", _WORDS.format("2 3 4"))
    else:
        op.execute(
            "UPDATE messages SET content = json_build_array(json_build_object('type', 'text', 'text', text))"
            " WHERE content IS NULL"
        )
        op.alter_column("messages", "content", nullable=False)
