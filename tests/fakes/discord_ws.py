"""The gateway websocket half of :class:`tests.fakes.discord.FakeDiscord` (a mixin).

Plain JSON text frames: HELLO, heartbeat ACKs, IDENTIFY -> READY + GUILD_CREATE, RESUME ->
replay of missed events + RESUMED, and dispatches with increasing ``s`` per session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes import discord_wire as wire


@dataclass(slots=True)
class Session:
    """A gateway session: survives its websocket so a RESUME can replay what was missed."""

    id: str
    shard: tuple[int, int]
    seq: int = 0
    backlog: list[tuple[int, str]] = field(default_factory=list)
    outbox: asyncio.Queue[str | None] | None = None


class GatewaySocket:
    """Sessions, sockets and dispatches; the host class provides the guilds, token and bot user."""

    _sessions: dict[str, Session]
    _sockets: set[web.WebSocketResponse]
    _dropped: set[web.WebSocketResponse]  # closed by the fake (resumable), not by the client
    token: str
    bot_user: dict[str, Any]
    guilds: dict[int, list[int]]
    heartbeat_interval: int
    heartbeats: int
    identify_count: int
    resume_count: int
    identify_payloads: list[dict[str, Any]]
    identify_times: list[float]

    def dispatch(self, event: str, data: Any, *, guild_id: int | None = None) -> None:
        """Send a dispatch (op 0) to every session whose shard owns ``guild_id`` (DMs: shard 0).

        The owner is ``(guild_id >> 22) % shard_count``, as Discord routes, with each session's
        own ``shard_count`` from its IDENTIFY. A session whose socket is down keeps the event and
        replays it on RESUME; a closed session (its client disconnected) gets nothing more.
        """
        for session in self._sessions.values():
            shard_id, shard_count = session.shard
            owner = 0 if guild_id is None else (guild_id >> 22) % shard_count
            if owner == shard_id:
                self._send_dispatch(session, event, data)

    def connected_shards(self) -> list[tuple[int, int]]:
        """(shard_id, shard_count) of every session with a live socket, sorted (duplicates kept)."""
        return sorted(s.shard for s in self._sessions.values() if s.outbox is not None)

    async def drop_connections(self, code: int = 4000) -> None:
        """Close every gateway socket with a resumable close code (the client should RESUME)."""
        for ws in list(self._sockets):
            self._dropped.add(ws)
            await ws.close(code=code)

    # --- gateway --------------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.add(ws)
        outbox: asyncio.Queue[str | None] = asyncio.Queue()
        writer = asyncio.create_task(_write(ws, outbox))
        session: Session | None = None
        hello = {"heartbeat_interval": self.heartbeat_interval, "_trace": ["fake-gateway"]}
        outbox.put_nowait(wire.frame(10, hello))
        try:
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(frame.data)
                op, data = payload.get("op"), payload.get("d")
                if op == 1:
                    self.heartbeats += 1
                    outbox.put_nowait(wire.frame(11, None))
                elif op == 2:
                    identified = self._identify(data, outbox)
                    if isinstance(identified, Session):
                        session = identified
                    else:
                        code, reason = identified
                        await ws.close(code=code, message=reason)
                elif op == 6:
                    session = self._resume(data, outbox)
        finally:
            if session is not None and session.outbox is outbox:
                session.outbox = None
                if ws.close_code == 1000 and ws not in self._dropped:
                    self._sessions.pop(session.id, None)  # the client closed: no RESUME, no more events
            self._dropped.discard(ws)
            outbox.put_nowait(None)
            await asyncio.gather(writer, return_exceptions=True)
            self._sockets.discard(ws)
        return ws

    def _identify(
        self, data: dict[str, Any], outbox: asyncio.Queue[str | None]
    ) -> Session | tuple[int, bytes]:
        """A new session, or the close code and reason Discord would answer with."""
        if data.get("token") != self.token:
            return 4004, b"Authentication failed."
        shard_id, shard_count = (int(v) for v in data.get("shard") or (0, 1))
        if not 0 <= shard_id < shard_count:
            return 4010, b"Invalid shard."
        self.identify_count += 1
        self.identify_payloads.append(data)
        self.identify_times.append(time.monotonic())
        session = Session(f"fake-session-{next(self._session_ids)}", (shard_id, shard_count))
        session.outbox = outbox
        self._sessions[session.id] = session
        mine = [g for g in self.guilds if (g >> 22) % session.shard[1] == session.shard[0]]
        ready = {
            "v": 10,
            "user": self.bot_user,
            "guilds": [{"id": str(g), "unavailable": True} for g in mine],
            "session_id": session.id,
            "resume_gateway_url": self.gateway_url,
            "shard": list(session.shard),
            "application": {"id": self.bot_user["id"], "flags": 0},
            "private_channels": [],
            "relationships": [],
            "user_settings": {},
            "session_type": "normal",
            "_trace": ["fake-gateway"],
        }
        self._send_dispatch(session, "READY", ready)
        for guild_id in mine:
            self._send_dispatch(session, "GUILD_CREATE", self._guild(guild_id))
        return session

    def _resume(self, data: dict[str, Any], outbox: asyncio.Queue[str | None]) -> Session | None:
        session = self._sessions.get(str(data.get("session_id")))
        if session is None or data.get("token") != self.token:
            outbox.put_nowait(wire.frame(9, False))
            return None
        self.resume_count += 1
        session.outbox = outbox
        last = int(data.get("seq") or 0)
        for seq, frame in session.backlog:
            if seq > last:
                outbox.put_nowait(frame)
        self._send_dispatch(session, "RESUMED", {"_trace": ["fake-gateway"]})
        return session

    def _send_dispatch(self, session: Session, event: str, data: Any) -> None:
        session.seq += 1
        frame = json.dumps({"op": 0, "s": session.seq, "t": event, "d": data})
        session.backlog.append((session.seq, frame))
        if session.outbox is not None:
            session.outbox.put_nowait(frame)


async def _write(ws: web.WebSocketResponse, outbox: asyncio.Queue[str | None]) -> None:
    """The one writer of a socket, so frames leave in the order they were queued."""
    while (frame := await outbox.get()) is not None:
        if ws.closed:
            return
        with contextlib.suppress(ConnectionError):
            await ws.send_str(frame)
