"""Alembic migrations for the Hygieia store (a package so it ships with the install)."""
