"""The sign-in page: what a browser without the admin cookie sees instead of a page.

A small form that POSTs the token to :data:`LOGIN_PATH` (see :mod:`gateway.admin.middleware`),
with the page asked for as ``next``; no header links (every one would lead back here).
"""

from __future__ import annotations

from gateway.admin.page import CSS, esc

LOGIN_PATH = "/login"

LOGIN_CSS = """
main.login{max-width:380px;margin:12vh auto 0;padding:22px 26px;border:1px solid #ddd;border-radius:8px}
main.login h1{font-size:20px;margin:0 0 14px}main.login label{display:block;font-weight:600;margin:0 0 4px}
main.login input[type=password]{box-sizing:border-box;width:100%;padding:7px 8px;font:inherit}
main.login button{margin:12px 0 4px;padding:6px 18px;font:inherit;background:#0b57d0;color:#fff;
border:1px solid #0842a0;border-radius:4px;cursor:pointer}main.login .error{margin:0 0 12px}
main.login p.muted{font-size:13px;margin:14px 0 0}
"""


def login_page(next_path: str, message: str = "") -> str:
    """The form; ``message`` (why the last attempt failed) above it, ``next_path`` where it leads."""
    alert = f'<p class="error" role="alert">{esc(message)}</p>' if message else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>Sign in · Hygieia admin</title><style>{CSS}{LOGIN_CSS}</style></head><body>"
        '<main class="login"><h1>Hygieia admin</h1>'
        f"{alert}"
        f'<form class="login" method="post" action="{LOGIN_PATH}">'
        '<label for="token">Admin token</label>'
        '<input id="token" type="password" name="token" autocomplete="current-password" required autofocus>'
        f'<input type="hidden" name="next" value="{esc(next_path)}">'
        '<button type="submit">Sign in</button></form>'
        '<p class="muted">The token is the value of <code>HYGIEIA_ADMIN_TOKEN</code> on the server. '
        "Programs send <code>Authorization: Bearer &lt;token&gt;</code> instead.</p>"
        "</main></body></html>"
    )
