"""``hygieia sessions``: list, show, search and restore conversations from the terminal."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from agent.types import SearchFilters, SearchHit, snippet_parts
from gateway.admin.export import ExportFormatError, from_jsonl, render, to_jsonl, to_markdown
from gateway.cli.common import err, open_store, out, print_json, run_async, settings_or_exit, when
from gateway.cli.short_ids import SHORT_ID, resolve_session_id
from gateway.store.export_ops import SessionExport
from gateway.store.find_ops import SORTS, SessionListing, SessionQuery

sessions_app = typer.Typer(
    help="Inspect conversations: list, show, search, restore, export, import.", no_args_is_help=True
)

JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
SessionIdArgument = Annotated[
    str,
    typer.Argument(
        metavar="ID",
        help="A session id, or a start of one that no other id shares (search prints 12 characters).",
    ),
]
SEARCH_COUNT_CAP = 1_000
"""A truncated search counts its matches up to this many (the largest --limit): no count costs
more than the largest page one may ask for."""


@sessions_app.command("list")
def list_sessions(
    platform: Annotated[
        str | None, typer.Option(metavar="NAME", help="Only this platform (telegram, discord, console).")
    ] = None,
    chat: Annotated[str | None, typer.Option(metavar="ID", help="Only this chat id.")] = None,
    user: Annotated[
        str | None, typer.Option(metavar="ID", help="Sessions of this user id, or where they wrote.")
    ] = None,
    key: Annotated[
        str | None, typer.Option(metavar="TEXT", help="Session keys containing this (any case).")
    ] = None,
    since: Annotated[
        datetime | None, typer.Option(metavar="TIME", help="Active since this time (UTC).")
    ] = None,
    sort: Annotated[
        str, typer.Option(metavar="activity|size|cost|compactions", help="What to sort by.")
    ] = "activity",
    order: Annotated[
        str, typer.Option(metavar="desc|asc", help="desc: largest or newest first; asc: the other way.")
    ] = "desc",
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, max=10_000, help="At most this many sessions.")
    ] = 50,
    offset: Annotated[int, typer.Option(metavar="N", min=0, help="Skip this many first (paging).")] = 0,
    active_only: Annotated[bool, typer.Option("--active-only", help="Hide ended sessions.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Sessions, most recently active first, with the admin API's filters, sort orders and paging."""
    if sort not in SORTS:
        raise typer.BadParameter(f"choose {', '.join(SORTS)}", param_hint="--sort")
    if order not in ("asc", "desc"):
        raise typer.BadParameter("choose asc or desc", param_hint="--order")
    # The admin API's own query (gateway.store.find_ops), so both find the same sessions.
    query = SessionQuery(
        platform=platform or None,
        chat_id=chat or None,
        user_id=user or None,
        key=key or None,
        active_since=_utc(since, "--since"),
        include_ended=not active_only,
        sort=sort,
        descending=order == "desc",
    )
    settings = settings_or_exit()

    async def fetch() -> tuple[list[SessionListing], int]:
        async with open_store(settings) as store:
            return await store.find_sessions(query, limit=limit, offset=offset)

    rows, total = run_async(fetch)
    if as_json:
        print_json([dataclasses.asdict(r) for r in rows])
        return
    table = Table(title=f"{len(rows)} of {total} session(s)")
    for column in ("id", "key", "active", "archived", "compactions", "cost", "last activity", "ended"):
        table.add_column(
            column, justify="right" if column in ("active", "archived", "compactions", "cost") else "left"
        )
    for r in rows:
        table.add_row(
            r.id,
            r.key,
            str(r.active),
            str(r.archived),
            str(r.compactions),
            f"${r.cost_usd:.4f}",
            when(r.last_activity_at),
            f"{when(r.ended_at)} ({r.end_reason})" if r.ended_at else "",
        )
    out.print(table)


@sessions_app.command("show")
def show_session(
    session_id: SessionIdArgument,
    archived: Annotated[
        bool,
        typer.Option(
            "--archived/--active", help="With archived messages (default), or the active view only."
        ),
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """One session: its settings, compactions, and messages (archived ones greyed)."""
    settings = settings_or_exit()

    async def fetch() -> tuple[Any, list[Any], list[Any], list[Any]]:
        async with open_store(settings) as store:
            info = await store.get_session(await resolve_session_id(store, session_id))
            compactions = await store.list_compactions(info.id)
            messages = await store.messages_after(info.id, -1)
            return info, compactions, messages, await store.dead_letters(info)

    info, compactions, messages, dead = run_async(fetch)
    if not archived:
        messages = [m for m in messages if m.active]
    if as_json:
        print_json(
            {
                "session": dataclasses.asdict(info),
                "compactions": [dataclasses.asdict(c) for c in compactions],
                "messages": [dataclasses.asdict(m) for m in messages],
                "dead_letters": [dataclasses.asdict(d) for d in dead],
            }
        )
        return
    active = sum(1 for m in messages if m.active)
    out.print(
        f"[bold]{info.key}[/bold]  session {info.id}\nmodel {info.model} · created {when(info.created_at)} · "
        f"last activity {when(info.last_activity_at)} · {active} active / "
        f"{sum(1 for m in messages if m.compacted)} archived · {len(compactions)} compaction(s)"
        + (f" · ended {when(info.ended_at)} ({info.end_reason})" if info.ended_at else ""),
        highlight=False,
    )
    if compactions:
        table = Table(title="compactions")
        for column in ("id", "when", "trigger", "status", "archived", "tokens", "restored"):
            table.add_column(column)
        for c in compactions:
            table.add_row(
                c.id[:12],
                when(c.created_at),
                c.trigger,
                c.status,
                str(c.messages_archived),
                f"{c.tokens_before} -> {c.tokens_after}",
                when(c.restored_at) if c.restored_at else "",
            )
        out.print(table)
    for m in messages:
        out.print(_message_line(m))
    if dead:
        out.print(_dead_letter_table(dead))


def _dead_letter_table(dead: list[Any]) -> Table:
    """Messages and replies given up on: what, when, how often tried, and why."""
    table = Table(title=f"{len(dead)} dead letter(s): given up on after repeated failures")
    for column in ("what", "id", "when", "attempts", "text", "error"):
        table.add_column(column)
    for d in dead:
        what = "received message" if d.source == "inbox" else "reply"
        table.add_row(what, str(d.id), when(d.at), str(d.attempts), Text(d.text[:80]), Text(d.error or ""))
    return table


def _message_line(m: Any) -> Text:
    author = m.author_name or m.role
    label = f"#{m.id} {when(m.created_at)} {author}"
    if m.kind != "message":
        label += f" [{m.kind}]"
    if not m.active:
        label += " (archived)" if m.compacted else " (retired)"
    body = m.text if len(m.text) <= 400 else m.text[:400] + "…"
    style = "grey50" if not m.active else ("cyan" if m.kind == "summary" else "")
    return Text(f"{label}: {body}", style=style)


@sessions_app.command("search")
def search_sessions(
    query: Annotated[str, typer.Argument(metavar="QUERY", help='Words, "a phrase", -exclude, prefix*.')],
    platform: Annotated[
        str | None, typer.Option(metavar="NAME", help="Only this platform (telegram, discord, console).")
    ] = None,
    chat: Annotated[str | None, typer.Option(metavar="ID", help="Only this chat id.")] = None,
    session: Annotated[
        str | None, typer.Option(metavar="ID", help="Only this session (its id, or the start of it).")
    ] = None,
    user: Annotated[str | None, typer.Option(metavar="ID", help="Only messages by this user id.")] = None,
    since: Annotated[datetime | None, typer.Option(metavar="TIME", help="From this time (UTC).")] = None,
    until: Annotated[datetime | None, typer.Option(metavar="TIME", help="Until this time (UTC).")] = None,
    state: Annotated[
        str, typer.Option(metavar="all|active|archived", help="Archived or active messages only, or both.")
    ] = "all",
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, max=1000, help="Show at most this many matches.")
    ] = 20,
    sort: Annotated[
        str,
        typer.Option(metavar="relevance|recent", help="relevance: best first; recent: newest first."),
    ] = "relevance",
    as_json: JsonOption = False,
) -> None:
    """Full-text search over every message, archived ones included."""
    if state not in ("active", "archived", "all"):
        raise typer.BadParameter("choose active, archived or all", param_hint="--state")
    if sort not in ("relevance", "recent"):
        raise typer.BadParameter("choose relevance or recent", param_hint="--sort")
    settings = settings_or_exit()
    filters = SearchFilters(
        platform=platform,
        chat_id=chat,
        user_id=user,
        since=_utc(since, "--since"),
        until=_utc(until, "--until"),
        state=state,  # type: ignore[arg-type]
    )

    async def fetch() -> tuple[list[SearchHit], int]:
        async with open_store(settings) as store:
            wanted = filters
            if session is not None:
                wanted = dataclasses.replace(filters, session_id=await resolve_session_id(store, session))
            hits = await store.search(query, wanted, limit=limit, sort=sort)  # type: ignore[arg-type]
            if len(hits) < limit or as_json:
                return hits, len(hits)
            return hits, await store.count_hits(query, wanted, cap=SEARCH_COUNT_CAP)

    hits, total = run_async(fetch)
    if as_json:
        print_json([dataclasses.asdict(h) for h in hits])
        return
    if not hits:
        out.print("no matches")
        return
    table = Table(title=f"{len(hits)} match(es)" if total <= len(hits) else None)
    for column in ("message", "session", "when", "who", "state", "snippet"):
        table.add_column(column)
    for h in hits:
        table.add_row(
            str(h.message_id),
            h.session_id[:SHORT_ID],
            when(h.created_at),
            h.author_name or h.role,
            "active" if h.active else "archived",
            _marked(h.snippet),
        )
    out.print(table)
    if total > len(hits):
        of = f"more than {SEARCH_COUNT_CAP:,}" if total > SEARCH_COUNT_CAP else f"{total:,}"
        out.print(f"showing {len(hits)} of {of} matches (--limit to see more)", highlight=False)


@sessions_app.command("restore")
def restore_session(
    session_id: SessionIdArgument,
    as_json: JsonOption = False,
) -> None:
    """Undo the latest compaction of a session: its archived turns become active again."""
    settings = settings_or_exit()

    async def restore() -> Any:
        async with open_store(settings) as store:
            return await store.restore_latest_compaction(await resolve_session_id(store, session_id))

    record = run_async(restore)
    if as_json:
        print_json(dataclasses.asdict(record))
        return
    out.print(
        f"restored compaction {record.id} "
        f"({record.trigger}, {record.messages_archived} messages active again)"
    )


def _marked(snippet: str) -> Text:
    """The snippet with its matches in bold reverse (a Text, never parsed as markup)."""
    text = Text()
    for part, match in snippet_parts(snippet):
        text.append(part, style="bold reverse" if match else "")
    return text


def _utc(value: datetime | None, flag: str) -> datetime | None:
    """``value`` in UTC (a time without an offset is taken as UTC)."""
    if value is None or value.tzinfo is None:
        return None if value is None else value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise typer.BadParameter(
            f"{value.isoformat()} is out of range once converted to UTC (years 1 to 9999)", param_hint=flag
        ) from None


@sessions_app.command("export")
def export_session(
    session_id: SessionIdArgument,
    fmt: Annotated[
        str,
        typer.Option("--format", metavar="jsonl|md", help="jsonl: imports back whole; md: Markdown to read."),
    ] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Every message of a session, archived ones included, with its compactions marked."""
    if fmt not in ("jsonl", "md"):
        raise typer.BadParameter("choose jsonl or md", param_hint="--format")
    settings = settings_or_exit()

    async def fetch() -> SessionExport:
        async with open_store(settings) as store:
            return await store.export_session(await resolve_session_id(store, session_id))

    data = run_async(fetch)
    if output is None:
        typer.echo(render(data, fmt), nl=False)  # type: ignore[arg-type]
        return
    chunks = to_jsonl(data) if fmt == "jsonl" else iter([to_markdown(data)])
    total = len(data.messages) + len(data.compactions) + 1 if fmt == "jsonl" else 1
    with output.open("w", encoding="utf-8") as sink, _progress() as progress:
        task = progress.add_task(f"Writing {output.name}", total=total)
        for chunk in chunks:
            sink.write(chunk)
            progress.advance(task)
    err.print(f"exported {len(data.messages)} messages of {data.session['key']} to {output}", highlight=False)


@sessions_app.command("import")
def import_session(
    path: Annotated[
        Path, typer.Argument(metavar="FILE", help="A JSONL file from `sessions export --format jsonl`.")
    ],
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="If the chat has a live session here, end it and make the imported one current.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Load an exported session (JSONL) into this database, as it was: active view, archive, compactions.

    Every row is checked first; nothing is written unless all are good (each bad one is named).
    A current session whose chat already has a live one here is refused unless --replace.
    """
    settings = settings_or_exit()
    try:
        with path.open(encoding="utf-8") as source:
            data = from_jsonl(source)
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot read {path}: {exc.strerror or exc}", highlight=False)
        raise typer.Exit(1) from None
    except ExportFormatError as exc:
        for line in str(exc).splitlines():
            err.print(f"[red]error:[/red] {escape(f'{path}: {line}')}", highlight=False)
        err.print(f"{path}: nothing was imported", highlight=False)
        raise typer.Exit(1) from None
    except UnicodeDecodeError as exc:
        err.print(f"[red]error:[/red] {path}: not UTF-8 text (byte {exc.start})", highlight=False)
        raise typer.Exit(1) from None

    async def load() -> str:
        async with open_store(settings) as store:
            return await store.import_session(data, replace=replace)

    session_id = run_async(load)
    if as_json:
        print_json({"session_id": session_id, "messages": len(data.messages)})
        return
    out.print(
        f"imported session {session_id} ({data.session['key']}): {len(data.messages)} messages, "
        f"{len(data.compactions)} compaction(s)",
        highlight=False,
    )


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )
