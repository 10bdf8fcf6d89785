"""The archive as an MCP server (``hygieia mcp serve``): read-only search and reading of every session."""
