"""The admin HTTP API and page (``hygieia admin serve``): :mod:`gateway.admin.app` builds it,
:mod:`gateway.admin.server` serves it. Nothing is imported here, so that a CLI command that only
needs the token check (``hygieia doctor``) does not load the whole service."""
