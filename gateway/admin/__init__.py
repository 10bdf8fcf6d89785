"""The admin HTTP API and page (``hygieia admin serve``)."""

from gateway.admin.app import create_app
from gateway.admin.server import AdminServer, serve_admin

__all__ = ["AdminServer", "create_app", "serve_admin"]
