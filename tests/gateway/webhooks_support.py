"""Helpers for the webhooks tests (imported explicitly; not a pytest conftest): signed posts."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx

from gateway.platforms.webhooks.signature import sign

SECRET = "s3cret-for-the-hook-tests"
SECRET_ENV = "HOOK_TEST_SECRET"
PUSH = {
    "ref": "refs/heads/main",
    "repository": {"full_name": "octo/hello"},
    "pusher": {"name": "mona"},
    "commits": [{"message": "Fix the flux capacitor"}],
}


def route(deliver_to: str, **overrides: Any) -> dict[str, Any]:
    """A route's settings as YAML would give them."""
    return {
        "secret_env": SECRET_ENV,
        "deliver_to": deliver_to,
        "template": "{{ pusher.name }} pushed to {{ repository.full_name }}: {{ commits.0.message }}",
        **overrides,
    }


def github_headers(body: bytes, *, delivery: str | None = None, secret: str = SECRET) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(secret.encode(), body),
    }


def generic_headers(
    body: bytes, *, delivery: str | None = None, timestamp: int | None = None, secret: str = SECRET
) -> dict[str, str]:
    stamp = None if timestamp is None else str(timestamp)
    headers = {"Content-Type": "application/json", "X-Hygieia-Signature": sign(secret.encode(), body, stamp)}
    if stamp is not None:
        headers["X-Hygieia-Timestamp"] = stamp
    if delivery is not None:
        headers["X-Hygieia-Delivery"] = delivery
    return headers


async def post_github(
    client: httpx.AsyncClient, url: str, payload: object, *, delivery: str | None = None
) -> httpx.Response:
    body = json.dumps(payload).encode()
    return await client.post(url, content=body, headers=github_headers(body, delivery=delivery))


def now() -> int:
    return int(time.time())
