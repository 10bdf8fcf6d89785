"""SQL storage: models, migrations runner, and the repository (the only code that writes SQL)."""

from gateway.store.db import Database
from gateway.store.repository import Store

__all__ = ["Database", "Store"]
