"""A large MCP catalog: a real server (the official SDK's ``MCPServer``) with ``count`` tools whose
descriptions and argument schemas are as wordy as a real integration's (a code host, a calendar,
mail, tickets, ...), for deferred loading and its bench.

Tools are named ``<verb>_<noun>`` (``list_issues``, ``get_forecasts``, ...); each answers its own
name and arguments as JSON, so a test sees which tool ran with what.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

NOUNS: dict[str, str] = {
    "issues": "issues of a repository on the code host (title, body, labels, assignees, state)",
    "pull_requests": "pull requests of a repository (branches, reviewers, checks, merge state)",
    "repositories": "repositories of an organisation (visibility, default branch, topics)",
    "calendar_events": "events of a calendar (start, end, attendees, location, recurrence)",
    "files": "files of a shared drive (path, owner, size, revision, sharing settings)",
    "emails": "messages of a mailbox (sender, recipients, subject, body, attachments)",
    "tickets": "support tickets of the help desk (priority, customer, status, replies)",
    "metrics": "time series of the monitoring system (name, labels, points, retention)",
    "deployments": "deployments of a service to an environment (version, status, logs)",
    "forecasts": "weather forecasts for a city (temperature, wind, rain, by the hour)",
}
VERBS: dict[str, str] = {
    "list": "List the {what}, newest first, one page at a time.",
    "get": "Get one of the {what} by its identifier, with every field.",
    "create": "Create a new entry among the {what} and return its identifier.",
    "update": "Change fields of one of the {what}; fields left out stay as they are.",
    "delete": "Delete one of the {what}; this cannot be undone.",
    "search": "Search the {what} with a free-text query and optional filters.",
}


def _handler(tool: str) -> Any:
    def run(
        target: Annotated[
            str, Field(description="The account, project, calendar or city the call is about.")
        ],
        query: Annotated[
            str, Field(description="Free text: an identifier, a title, or words to look for.")
        ] = "",
        limit: Annotated[int, Field(description="At most this many entries in the answer (1-100).")] = 20,
        fields: Annotated[
            list[str] | None, Field(description="Only these fields in the answer; all of them when absent.")
        ] = None,
        dry_run: Annotated[bool, Field(description="Check the call without changing anything.")] = False,
    ) -> str:
        return json.dumps({"tool": tool, "target": target, "query": query, "limit": limit})

    return run


def catalog_tool_names(count: int = 60) -> list[str]:
    """The names of the first ``count`` tools, in the server's order."""
    names = [f"{verb}_{noun}" for noun in NOUNS for verb in VERBS]
    if count > len(names):
        raise ValueError(f"at most {len(names)} tools")
    return names[:count]


def catalog_server(count: int = 60, name: str = "wide") -> MCPServer:
    """A fresh server with ``count`` tools (at most 60)."""
    srv: MCPServer = MCPServer(name, log_level="WARNING")
    for tool in catalog_tool_names(count):
        verb, _, noun = tool.partition("_")
        description = VERBS[verb].format(what=NOUNS[noun]) + (
            " Needs an account connected by the operator; answers an error naming the missing "
            "permission when the account may not do this."
        )
        srv.add_tool(_handler(tool), name=tool, description=description)
    return srv
