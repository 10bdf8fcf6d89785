"""Exporting a session whole (every message, archived ones too, and its compactions), and importing it."""

from __future__ import annotations

from gateway.store.base import Repo


class ExportOps(Repo):
    pass
