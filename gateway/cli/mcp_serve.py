"""``hygieia mcp serve``: the archive as an MCP server, over stdio or Streamable HTTP."""

from __future__ import annotations

from typing import Annotated

import typer

from agent.errors import ConfigError
from gateway.cli.common import err, open_store, run_async, settings_or_exit

mcp_app = typer.Typer(
    help="The archive as an MCP server, for Claude Code or any MCP client.", no_args_is_help=True
)

DEFAULT_PORT = 8643


@mcp_app.command("serve")
def mcp_serve(
    http: Annotated[
        bool,
        typer.Option("--http", help="Serve Streamable HTTP (needs HYGIEIA_ADMIN_TOKEN) instead of stdio."),
    ] = False,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="With --http: address to listen on.")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            metavar="PORT", min=0, max=65535, help="With --http: port to listen on (0: any free port)."
        ),
    ] = DEFAULT_PORT,
) -> None:
    """Serve the archive read-only (search_sessions, read_session, get_message) until interrupted.

    Stdio by default (an MCP client starts this command); with --http, Streamable HTTP at /mcp where
    every request sends `Authorization: Bearer <token>`, the value of HYGIEIA_ADMIN_TOKEN.
    """
    settings = settings_or_exit()
    token: str | None = None
    if http:
        from gateway.admin.middleware import check_admin_token

        try:
            token = check_admin_token(
                settings.admin_token.get_secret_value() if settings.admin_token else None
            )
        except ConfigError as exc:
            err.print(f"[red]configuration error:[/red] {exc}", highlight=False)
            raise typer.Exit(2) from None
    from gateway.logging_setup import configure_logging

    # Logs go to stderr and the log file: on stdio, stdout carries the protocol and nothing else.
    configure_logging(settings)
    from gateway.archive_server.serving import serve_http
    from gateway.archive_server.tools import archive_server

    def ready(url: str) -> None:
        err.print(
            f"Archive MCP server: {url} (send Authorization: Bearer <HYGIEIA_ADMIN_TOKEN>)", highlight=False
        )

    async def serve() -> None:
        async with open_store(settings) as store:
            srv = archive_server(store)
            if token is None:
                await srv.run_stdio_async()
            else:
                await serve_http(srv, token=token, host=host, port=port, on_ready=ready)

    run_async(serve)
