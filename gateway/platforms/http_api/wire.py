"""The request bodies of the API as TypedDicts, parsed once at the edge: whatever a client sends,
either a well-formed request comes out or an OpenAI-shaped 400 naming the field (``param``).

Fields we do not use (``temperature``, ``tools``, ...) are accepted and ignored: clients send them
by default, and the agent's own settings decide those things here.
"""

from __future__ import annotations

import json
import re
from typing import Literal, TypedDict

from gateway.platforms.http_api.errors import invalid_request

Role = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
CONVERSATION_NAME = re.compile(r"[A-Za-z0-9_.@+:-]{1,64}")
"""A conversation's name: it becomes part of the chat id (``api:<key name>:<conversation>``)."""
MAX_MESSAGES = 10_000


class WireMessage(TypedDict):
    """One message of a request: its role and its text (text parts joined)."""

    role: str
    text: str


class ChatRequest(TypedDict):
    """``POST /v1/chat/completions``."""

    model: str
    messages: list[WireMessage]
    stream: bool
    user: str | None


class ResponsesRequest(TypedDict):
    """``POST /v1/responses``."""

    model: str
    input: list[WireMessage]
    conversation: str | None
    previous_response_id: str | None
    stream: bool


def load_json(body: bytes) -> dict[str, object]:
    """The body as a JSON object; 400 for anything else (bad UTF-8, bad JSON, too deep, not an object)."""
    try:
        value = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise invalid_request("The body is not valid UTF-8.") from None
    except (ValueError, RecursionError):
        raise invalid_request(
            "We could not parse the JSON body of your request. Send a JSON object "
            "(Content-Type: application/json)."
        ) from None
    if not isinstance(value, dict):
        raise invalid_request("The JSON body must be an object.")
    return value


def _string(raw: dict[str, object], name: str, *, required: bool = False) -> str | None:
    value = raw.get(name)
    if value is None:
        if required:
            raise invalid_request(f"Missing required parameter: '{name}'.", name)
        return None
    if not isinstance(value, str):
        raise invalid_request(f"'{name}' must be a string.", name)
    return value


def _flag(raw: dict[str, object], name: str) -> bool:
    value = raw.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid_request(f"'{name}' must be a boolean.", name)
    return value


def _content(value: object, param: str) -> str:
    """A message's content: a string, or a list of text parts (joined); images and files are refused."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise invalid_request("A message's content must be a string or a list of content parts.", param)
    texts: list[str] = []
    for index, part in enumerate(value):
        where = f"{param}[{index}]"
        if not isinstance(part, dict):
            raise invalid_request("A content part must be an object.", where)
        kind = part.get("type")
        if kind not in ("text", "input_text", "output_text"):
            raise invalid_request(
                f"Content parts of type {str(kind)[:40]!r} are not supported here: send text.",
                f"{where}.type",
            )
        text = part.get("text")
        if not isinstance(text, str):
            raise invalid_request("A text part needs a string 'text'.", f"{where}.text")
        texts.append(text)
    return "\n".join(texts)


def _messages(value: object, param: str) -> list[WireMessage]:
    if not isinstance(value, list) or not value:
        raise invalid_request(f"'{param}' must be a non-empty array of messages.", param)
    if len(value) > MAX_MESSAGES:
        raise invalid_request(f"'{param}' has more than {MAX_MESSAGES:,} messages.", param)
    out: list[WireMessage] = []
    for index, item in enumerate(value):
        where = f"{param}[{index}]"
        if not isinstance(item, dict):
            raise invalid_request("A message must be an object.", where)
        role = item.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise invalid_request(
                "A message's 'role' must be one of system, developer, user, assistant, tool.", f"{where}.role"
            )
        out.append(WireMessage(role=role, text=_content(item.get("content"), f"{where}.content")))
    return out


def parse_chat(raw: dict[str, object]) -> ChatRequest:
    """A chat completions request; 400 naming the first field that is wrong."""
    model = _string(raw, "model", required=True)
    assert model is not None
    return ChatRequest(
        model=model,
        messages=_messages(raw.get("messages"), "messages"),
        stream=_flag(raw, "stream"),
        user=_string(raw, "user"),
    )


def parse_responses(raw: dict[str, object]) -> ResponsesRequest:
    """A responses request: ``input`` is a string or a list of messages; ``conversation`` a name or
    ``{"id": name}``."""
    model = _string(raw, "model", required=True)
    assert model is not None
    given = raw.get("input")
    single = isinstance(given, str)
    messages = [WireMessage(role="user", text=str(given))] if single else _messages(given, "input")
    conversation = raw.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if conversation is not None and not isinstance(conversation, str):
        raise invalid_request("'conversation' must be a name or {\"id\": name}.", "conversation")
    return ResponsesRequest(
        model=model,
        input=messages,
        conversation=conversation,
        previous_response_id=_string(raw, "previous_response_id"),
        stream=_flag(raw, "stream"),
    )


def conversation_name(value: str, param: str) -> str:
    """``value`` when it is a valid conversation name, else a 400 naming ``param``."""
    if not CONVERSATION_NAME.fullmatch(value):
        raise invalid_request(
            "A conversation name is 1-64 characters: letters, digits and . _ @ + : -", param
        )
    return value


def new_text(messages: list[WireMessage], param: str) -> str:
    """What the request adds to the conversation: the user messages after its last assistant message.

    The server keeps the history, so a client that resends all of it (as OpenAI clients do) adds
    only what follows the last answer it got; system and developer messages are not appended (the
    agent has its own instructions), nor are tool results (the agent runs its own tools).
    """
    last_assistant = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    texts = [m["text"] for m in messages[last_assistant + 1 :] if m["role"] == "user"]
    text = "\n\n".join(t for t in texts if t.strip())
    if not text:
        raise invalid_request("The request has no new user message after the last assistant message.", param)
    return text
