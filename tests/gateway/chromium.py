"""Headless Chromium (Debian's package) driven over the DevTools protocol with aiohttp: no other driver.

``async with Browser.launch(tmp_dir) as browser`` starts Chromium with a fresh profile and the
flags that work on our machines (no network chatter); ``browser.page`` navigates, clicks,
types, reads the DOM and takes screenshots. Clicks and typing are done the way a person's
would land (a click on the element, its form submitted by its button), and every navigation
waits for the page's load event.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--window-size=1280,900",
    "--remote-debugging-port=0",
)
TIMEOUT = 20.0


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


class CDPError(Exception):
    pass


class Page:
    """One tab: DevTools commands over its websocket, page events kept for waiting."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._loaded = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for frame in self._ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(frame.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            elif data.get("method") == "Page.loadEventFired":
                self._loaded.set()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        command_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[command_id] = future
        await self._ws.send_str(json.dumps({"id": command_id, "method": method, "params": params}))
        reply = await asyncio.wait_for(future, TIMEOUT)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    @contextlib.asynccontextmanager
    async def navigation(self) -> AsyncIterator[None]:
        """Whatever runs inside causes a navigation; leaving waits for the new page's load event."""
        self._loaded.clear()
        yield
        await asyncio.wait_for(self._loaded.wait(), TIMEOUT)

    async def goto(self, url: str) -> None:
        async with self.navigation():
            await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        reply = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in reply:
            raise CDPError(f"{expression[:80]}: {reply['exceptionDetails'].get('text')}")
        return reply["result"].get("value")

    async def click(self, selector: str, *, navigates: bool = True) -> None:
        """A real mouse click at the element's centre (scrolled into view)."""
        box = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if box is None:
            raise CDPError(f"nothing matches {selector!r}")
        x, y = box
        action = self.navigation() if navigates else contextlib.nullcontext()
        async with action:
            for kind in ("mousePressed", "mouseReleased"):
                await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    async def type_into(self, selector: str, text: str) -> None:
        """Focus the field, clear it, and type ``text`` as keyboard input."""
        await self.click(selector, navigates=False)
        await self.evaluate(f"document.querySelector({json.dumps(selector)}).select()")
        await self.send("Input.insertText", text=text)

    async def text(self, selector: str = "body") -> str:
        return str(await self.evaluate(f"document.querySelector({json.dumps(selector)}).innerText") or "")

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        await asyncio.to_thread(_write, path, base64.b64decode(shot["data"]))

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self._ws.close()


class Browser:
    def __init__(self, process: asyncio.subprocess.Process, http: aiohttp.ClientSession, page: Page) -> None:
        self._process = process
        self._http = http
        self.page = page

    @classmethod
    @contextlib.asynccontextmanager
    async def launch(cls, profile: Path) -> AsyncIterator[Browser]:
        executable = chromium_path()
        if executable is None:
            raise CDPError("Chromium is not installed")
        process = await asyncio.create_subprocess_exec(
            executable,
            *FLAGS,
            f"--user-data-dir={profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        http = aiohttp.ClientSession()
        page: Page | None = None
        try:
            port = await _devtools_port(profile, process)
            async with http.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = await response.json()
            ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
            page = Page(await http.ws_connect(ws_url, max_msg_size=0))
            await page.send("Page.enable")
            yield cls(process, http, page)
        finally:
            if page is not None:
                await page.close()
            await http.close()
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 10)
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def _devtools_port(profile: Path, process: asyncio.subprocess.Process) -> int:
    """Chromium writes the port it listens on to DevToolsActivePort in the profile."""
    marker = profile / "DevToolsActivePort"
    for _ in range(int(TIMEOUT / 0.05)):
        if process.returncode is not None:
            raise CDPError(f"Chromium exited with {process.returncode}")
        if marker.is_file():
            first = marker.read_text().splitlines()[:1]
            if first and first[0].isdigit():
                return int(first[0])
        await asyncio.sleep(0.05)
    raise CDPError("Chromium did not open its DevTools port")
