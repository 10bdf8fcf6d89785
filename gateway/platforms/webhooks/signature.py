"""Shared-secret HMAC-SHA256 signatures: GitHub's form and the generic one (docs/webhooks.md).

``github``: ``X-Hub-Signature-256: sha256=<hex HMAC of the body>``, delivery id ``X-GitHub-Delivery``.
``generic``: ``X-Hygieia-Signature: sha256=<hex HMAC>`` of the body, or, when the sender adds
``X-Hygieia-Timestamp: <unix seconds>``, of ``<timestamp>.<body>`` (then the timestamp must be
within the route's skew: a captured request cannot be replayed later); delivery id
``X-Hygieia-Delivery``. Comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

GITHUB_SIGNATURE = "x-hub-signature-256"
GITHUB_DELIVERY = "x-github-delivery"
GITHUB_EVENT = "x-github-event"
GENERIC_SIGNATURE = "x-hygieia-signature"
GENERIC_TIMESTAMP = "x-hygieia-timestamp"
GENERIC_DELIVERY = "x-hygieia-delivery"
GENERIC_EVENT = "x-hygieia-event"
_PREFIX = "sha256="
MAX_DELIVERY_ID = 64


@dataclass(frozen=True, slots=True)
class Verdict:
    """``ok`` or why not (said to the sender in the 401)."""

    ok: bool
    reason: str = ""


def sign(secret: bytes, body: bytes, timestamp: str | None = None) -> str:
    """The header value a sender puts on ``body`` (tests, the bench and docs use it)."""
    message = body if timestamp is None else timestamp.encode() + b"." + body
    return _PREFIX + hmac.new(secret, message, hashlib.sha256).hexdigest()


def verify(
    style: str, secret: bytes, body: bytes, headers: Mapping[str, str], *, now: float, max_skew: int
) -> Verdict:
    """Check the request's signature header for ``style`` (``github`` or ``generic``)."""
    name = GITHUB_SIGNATURE if style == "github" else GENERIC_SIGNATURE
    given = headers.get(name)
    if not given:
        return Verdict(False, f"missing {name} header")
    timestamp = headers.get(GENERIC_TIMESTAMP) if style == "generic" else None
    if timestamp is not None:
        try:
            at = int(timestamp)
        except ValueError:
            return Verdict(False, f"{GENERIC_TIMESTAMP} is not unix seconds")
        if abs(now - at) > max_skew:
            return Verdict(False, f"{GENERIC_TIMESTAMP} is more than {max_skew}s away from now")
    expected = sign(secret, body, timestamp)
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        return Verdict(False, f"{name} does not match the body (expected sha256=<hex HMAC-SHA256>)")
    return Verdict(True)


def delivery_id(style: str, headers: Mapping[str, str], body: bytes) -> str:
    """The sender's delivery id; without one, the body's digest (an identical body is the same
    delivery: a sender retrying without an id is stored once)."""
    given = headers.get(GITHUB_DELIVERY if style == "github" else GENERIC_DELIVERY, "").strip()
    if given:
        # The inbox keeps ``webhook:<route>:<id>`` in 128 characters: a long id is kept as its digest.
        if len(given) <= MAX_DELIVERY_ID:
            return given
        return "sha256-" + hashlib.sha256(given.encode()).hexdigest()[:32]
    return "sha256-" + hashlib.sha256(body).hexdigest()[:32]


def event_name(style: str, headers: Mapping[str, str]) -> str:
    """The event the sender names (``push``, ``issues``...), ``""`` when none."""
    return headers.get(GITHUB_EVENT if style == "github" else GENERIC_EVENT, "").strip()[:100]
