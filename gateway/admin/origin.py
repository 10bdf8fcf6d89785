"""Is a request signed in by the cookie one the admin page itself made? The check against
cross-origin actions.

SameSite=Strict does not stop a form on another port of the same host (the same *site*), so a
state-changing request that rides on the cookie must show it comes from this origin:
``Sec-Fetch-Site: same-origin`` (or ``none``: typed by the admin), else an ``Origin`` equal to
this host. A browser sends one or the other on every POST; a request with neither is refused.
The JSON API takes the cookie only with ``Content-Type: application/json``, which no plain form
can send (another origin would need a CORS preflight, which this app never grants).
A program signs in with the bearer token and is not concerned: a browser never adds it by itself.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_OWN_FETCH_SITES = frozenset({"same-origin", "none"})


def _own_host(request: Request) -> str:
    return request.headers.get("host", "").strip().lower()


def cross_origin_problem(request: Request) -> str | None:
    """Why a cookie-signed request may not change anything (one line), or None when it may."""
    if request.method in SAFE_METHODS:
        return None
    fetch_site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if fetch_site is not None and fetch_site.strip().lower() not in _OWN_FETCH_SITES:
        return (
            f"refused: a {fetch_site[:20]} request (Sec-Fetch-Site) is not from this origin and may not act"
        )
    if fetch_site is None:
        if origin is None:
            return "refused: no Origin or Sec-Fetch-Site header shows this comes from the admin page"
        parts = urlsplit(origin.strip()) if origin.strip() != "null" else None
        if parts is None or not parts.netloc or parts.netloc.lower() != _own_host(request):
            return f"refused: a request from another origin ({origin[:80]}) may not act"
    if request.url.path.startswith("/api/"):
        media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type != "application/json":
            return (
                "refused: the API takes the sign-in cookie only with Content-Type: application/json "
                "(programs send Authorization: Bearer <token>)"
            )
    return None
