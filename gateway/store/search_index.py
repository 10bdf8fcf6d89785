"""What the search index holds for a message: a bounded prefix of its text.

Every message is stored whole; the index covers its first :data:`INDEX_CHARS` characters
on both engines (PostgreSQL cannot index a tsvector over 1 MB, and a bounded prefix keeps
every row's index entry, and its highlighting, cheap). Migration ``0003_search_index``
builds the index with the same number.
"""

from __future__ import annotations

INDEX_CHARS = 65_536
"""Characters of ``messages.text`` the search index covers."""
