"""The ``hygieia`` command: run the service, migrate, check the setup, inspect sessions."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from agent.errors import ConfigError
from gateway.cli.bench import bench_command
from gateway.cli.common import err, out, run_async, safe_url, settings_or_exit
from gateway.cli.doctor import doctor_command
from gateway.cli.mcp_serve import mcp_app
from gateway.cli.sessions import sessions_app
from gateway.store.migrate import current_revision, pending_revisions, upgrade_to

app = typer.Typer(
    name="hygieia",
    help="Hygieia: an LLM agent behind Telegram and Discord whose conversations live for months.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
admin_app = typer.Typer(help="The admin HTTP API and page.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
app.add_typer(admin_app, name="admin")
app.add_typer(mcp_app, name="mcp")
app.command(
    "doctor",
    help="Check config, database, tokens and endpoints; print what is wrong (exit 1 when something must be "
    "fixed).",
)(doctor_command)
app.command("bench", help="Run a benchmark from bench/ (all of them without NAME) and print its table.")(
    bench_command
)


@app.command()
def run(
    platform: Annotated[
        list[str] | None,
        typer.Option(
            "--platform",
            "-p",
            metavar="NAME",
            help="console, telegram, discord, api or webhooks; repeat for several.",
        ),
    ] = None,
    role: Annotated[
        str,
        typer.Option(
            "--role",
            metavar="all|intake|worker",
            help="all: intake and worker; intake: take messages in only; worker: serve the inbox and "
            "deliver only. intake and worker need PostgreSQL (docs/operations.md, Scale-out).",
        ),
    ] = "all",
) -> None:
    """Start the service (migrates the database first) and serve until interrupted."""
    settings = settings_or_exit()
    # Imported here, not at the top: the service pulls in the platform SDKs (~2 s), which
    # `hygieia sessions ...` and `--help` should not pay for.
    from gateway.logging_setup import configure_logging
    from gateway.runner import chats_on_this_terminal, run_service

    allowed = {"console", "telegram", "discord", "api", "webhooks"}
    unknown = [p for p in platform or [] if p not in allowed]
    if unknown:
        err.print(
            f"[red]--platform:[/red] unknown {', '.join(unknown)};"
            " choose from console, telegram, discord, api, webhooks"
        )
        raise typer.Exit(2)
    from gateway.cluster.roles import check_role
    from gateway.runner import dialect_of

    try:
        check_role(role, dialect_of(settings))
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    configure_logging(settings, chat=chats_on_this_terminal(settings, platform))
    chosen = list(platform) if platform else None
    code = run_async(lambda: run_service(settings, chosen, role=role))
    raise typer.Exit(code)


@app.command()
def migrate(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Upgrade the database to the newest schema (safe on a live database)."""
    settings = settings_or_exit()
    url = settings.resolved_database_url
    settings.data_dir.mkdir(parents=True, exist_ok=True)

    async def upgrade() -> tuple[str | None, str | None]:
        before = await current_revision(url)
        pending = pending_revisions(before)
        # Progress on stderr, so that --json output stays one clean document on stdout.
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        ) as progress:
            task = progress.add_task("Upgrading the database schema", total=len(pending))
            for revision in pending:
                progress.update(task, description=f"Applying {revision}")
                await upgrade_to(url, revision)
                progress.advance(task)
        return before, await current_revision(url)

    before, after = run_async(upgrade)
    if as_json:
        typer.echo(json.dumps({"database": safe_url(url), "from": before, "to": after}))
    else:
        change = "already at head" if before == after else f"{before or 'empty'} -> {after}"
        out.print(f"database {safe_url(url)}: {change}", highlight=False)


@admin_app.command("serve")
def admin_serve(
    host: Annotated[
        str | None, typer.Option(metavar="HOST", help="Address to listen on (default: admin.host).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            metavar="PORT",
            min=0,
            max=65535,
            help="Port to listen on (default: admin.port; 0: any free port).",
        ),
    ] = None,
) -> None:
    """Serve the admin HTTP API and page until interrupted (needs HYGIEIA_ADMIN_TOKEN).

    In a browser, the page asks for the token (the value of HYGIEIA_ADMIN_TOKEN) and keeps an HttpOnly
    SameSite=Strict cookie. Programs send the header `Authorization: Bearer <token>`; a script may open
    /?token=<token> once to get the cookie.
    """
    settings = settings_or_exit()
    from gateway.admin.middleware import check_admin_token  # lazily, as in `run`: FastAPI is heavy
    from gateway.admin.server import serve_admin

    try:
        check_admin_token(settings.admin_token.get_secret_value() if settings.admin_token else None)
    except ConfigError as exc:
        err.print(f"[red]configuration error:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    from gateway.logging_setup import configure_logging

    configure_logging(settings)
    listen_host = host or settings.admin.host
    listen_port = settings.admin.port if port is None else port

    def how_to_sign_in(url: str) -> None:
        out.print(
            f"Admin page: {url}\nSign in there with the admin token, the value of HYGIEIA_ADMIN_TOKEN "
            "(programs send the header Authorization: Bearer <token>).",
            highlight=False,
            soft_wrap=True,
        )

    raise typer.Exit(
        run_async(lambda: serve_admin(settings, host=listen_host, port=listen_port, on_ready=how_to_sign_in))
    )


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
