"""Hostile and malformed requests: every one gets an OpenAI-shaped 4xx, never a 500, and the
conversation is not touched (a normal request afterwards is answered from an intact history).

``HOSTILE`` is the table of what was tried (its length is the count quoted in docs/api.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.gateway.platforms.http_api.api_support import ALICE_KEY, api_and_model

TEN_MB = 10 * 1024 * 1024
GOOD_MESSAGES = [{"role": "user", "content": "hello"}]


@dataclass(frozen=True)
class Hostile:
    name: str
    status: int
    body: bytes | None = None
    path: str = "/chat/completions"
    method: str = "POST"
    headers: dict[str, str] = field(default_factory=dict)
    raw_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    chunked: bool = False


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


def _chat(**fields: object) -> bytes:
    return _json({"model": "hygieia", "messages": GOOD_MESSAGES, **fields})


HOSTILE: list[Hostile] = [
    Hostile("truncated JSON", 400, b'{"model": "hygieia", "messages": ['),
    Hostile("empty body", 400, b""),
    Hostile("JSON array", 400, b"[]"),
    Hostile("JSON string", 400, b'"hello"'),
    Hostile("invalid UTF-8", 400, b'{"model": "\xff\xfe"}'),
    Hostile("nested 100k deep", 400, b"[" * 100_000 + b"]" * 100_000),
    Hostile("5000-digit number", 400, b'{"model": ' + b"1" * 5000 + b"}"),
    Hostile("NaN model", 400, b'{"model": NaN, "messages": []}'),
    Hostile("model missing", 400, _json({"messages": GOOD_MESSAGES})),
    Hostile("model a number", 400, _json({"model": 4, "messages": GOOD_MESSAGES})),
    Hostile("model unknown", 404, _json({"model": "gpt-4o", "messages": GOOD_MESSAGES})),
    Hostile("model 500k chars", 404, _json({"model": "m" * 500_000, "messages": GOOD_MESSAGES})),
    Hostile("messages missing", 400, _json({"model": "hygieia"})),
    Hostile("messages empty", 400, _chat(messages=[])),
    Hostile("messages an object", 400, _chat(messages={"role": "user"})),
    Hostile("message a string", 400, _chat(messages=["hello"])),
    Hostile("role unknown", 400, _chat(messages=[{"role": "wizard", "content": "hi"}])),
    Hostile("role missing", 400, _chat(messages=[{"content": "hi"}])),
    Hostile("content a number", 400, _chat(messages=[{"role": "user", "content": 42}])),
    Hostile(
        "content part an image", 400, _chat(messages=[{"role": "user", "content": [{"type": "image_url"}]}])
    ),
    Hostile(
        "content part without text", 400, _chat(messages=[{"role": "user", "content": [{"type": "text"}]}])
    ),
    Hostile("content parts not objects", 400, _chat(messages=[{"role": "user", "content": ["a"]}])),
    Hostile("only an assistant message", 400, _chat(messages=[{"role": "assistant", "content": "hi"}])),
    Hostile("only blank user text", 400, _chat(messages=[{"role": "user", "content": " \n\t"}])),
    Hostile("10,001 messages", 400, _chat(messages=[{"role": "user", "content": "x"}] * 10_001)),
    Hostile("stream a string", 400, _chat(stream="yes")),
    Hostile("user with spaces", 400, _chat(user="a b")),
    Hostile("user of odd Unicode", 400, _chat(user="\u202eevil\u200d👨‍👩‍👧")),
    Hostile("user of 65 characters", 400, _chat(user="u" * 65)),
    Hostile(
        "conversation header odd bytes",
        400,
        _chat(),
        raw_headers=[(b"x-hygieia-conversation", b"caf\xe9 \x7f")],
    ),
    Hostile("10 MB body", 413, _chat(messages=[{"role": "user", "content": "x" * TEN_MB}])),
    Hostile("10 MB body, chunked", 413, b"x" * TEN_MB, chunked=True),
    Hostile("GET on chat completions", 405, None, method="GET"),
    Hostile("unknown endpoint", 404, _chat(), path="/embeddings"),
    Hostile("path traversal", 404, None, path="/../../etc/passwd", method="GET"),
    Hostile("responses: input a number", 400, _json({"model": "hygieia", "input": 5}), path="/responses"),
    Hostile(
        "responses: conversation a list",
        400,
        _json({"model": "hygieia", "input": "hi", "conversation": [1]}),
        path="/responses",
    ),
    Hostile(
        "responses: conversation odd Unicode",
        400,
        _json({"model": "hygieia", "input": "hi", "conversation": "\u0000\ud800"}),
        path="/responses",
    ),
    Hostile(
        "responses: unknown previous id",
        404,
        _json({"model": "hygieia", "input": "hi", "previous_response_id": "resp_nope"}),
        path="/responses",
    ),
    Hostile(
        "responses: previous id of 100k chars",
        404,
        _json({"model": "hygieia", "input": "hi", "previous_response_id": "r" * 100_000}),
        path="/responses",
    ),
    Hostile("Basic auth", 401, _chat(), headers={"Authorization": "Basic YWxpY2U6cGFzcw=="}),
    Hostile("bearer of odd bytes", 401, _chat(), raw_headers=[(b"authorization", b"Bearer \xff\xfe\xe9")]),
]


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 65536):
        yield body[start : start + 65536]


async def _send(base_url: str, case: Hostile) -> httpx.Response:
    headers: list[tuple[bytes, bytes]] = [(k.encode(), v.encode()) for k, v in case.headers.items()]
    if not any(k.lower() == "authorization" for k, _ in case.headers.items()) and not any(
        k == b"authorization" for k, _ in case.raw_headers
    ):
        headers.append((b"authorization", f"Bearer {ALICE_KEY}".encode()))
    headers += case.raw_headers
    headers.append((b"content-type", b"application/json"))
    async with httpx.AsyncClient(timeout=60) as http:
        content = _chunks(case.body) if case.chunked and case.body is not None else case.body
        return await http.request(case.method, base_url + case.path, content=content, headers=headers)


async def test_every_hostile_request_gets_an_openai_shaped_4xx(tmp_path: Path, db_url: str) -> None:
    wrong: list[str] = []
    async with api_and_model(tmp_path, db_url) as (api, fake, _responder):
        for case in HOSTILE:
            try:
                answer = await _send(api.base_url, case)
            except httpx.HTTPError as exc:  # a body refused mid-upload: the server closed early
                wrong.append(f"{case.name}: {type(exc).__name__}")
                continue
            error = (
                answer.json().get("error")
                if answer.headers.get("content-type", "").startswith("application/json")
                else None
            )
            shaped = isinstance(error, dict) and set(error) == {"message", "type", "param", "code"}
            if answer.status_code != case.status or not shaped:
                wrong.append(f"{case.name}: {answer.status_code} {answer.text[:200]}")
        assert wrong == []
        assert fake.message_requests == []  # nothing reached the model
        normal = await api.client().chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "still fine?"}]
        )
        assert normal.choices[0].message.content == "reply: still fine?"


async def test_odd_unicode_in_a_message_is_answered_and_stored_clean(tmp_path: Path, db_url: str) -> None:
    odd = "nul\u0000 bidi\u202e zwj👨\u200d👩 combining e\u0301\u0301 bom\ufeff lone\ud800 end"
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder), api.http() as http:
        body = json.dumps({"model": "hygieia", "messages": [{"role": "user", "content": odd}]})
        answer = await http.post(
            "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 200
        session = await api.service.store.current_session("api:alice:default")
        assert session is not None
        stored = [m.text for m in await api.service.store.load_active(session.id)]
        assert any("zwj👨\u200d👩" in t and "\u0000" not in t and "\ud800" not in t for t in stored)
