"""Reading an HTTP answer's body with a ceiling on what it becomes once decoded.

A server may answer with a small gzip body that inflates to gigabytes, or with a body that never
ends. Decoding here inflates each piece at most ``STEP`` bytes at a time and stops as soon as the
decoded total passes the limit, so memory stays near the limit whatever was sent. Used by the
model's plain calls (an aiohttp body), by the SDK's streams (an httpx2 response hook) and by the
transcription client.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import aiohttp
import httpx2

STEP = 1 << 20
READ_CHUNK = 1 << 16
# What we offer: the two encodings the decoder knows.
ACCEPT_ENCODING = "gzip, deflate"


class BodyTooLarge(Exception):
    """The decoded body passed its limit; nothing past it was kept."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer is larger than {limit:,} bytes once decoded")
        self.limit = limit


class BodyUndecodable(Exception):
    """The body is in an encoding not asked for, or its compressed data is corrupt."""


class BoundedDecoder:
    """Decodes one body (identity, gzip or deflate) piece by piece, never past ``limit`` bytes."""

    def __init__(self, encoding: str | None, limit: int) -> None:
        kind = (encoding or "identity").strip().lower()
        if kind not in ("identity", "gzip", "x-gzip", "deflate"):
            raise BodyUndecodable(f"the answer is in an encoding not asked for ({kind[:40]})")
        self._kind = kind
        self._limit = limit
        self._total = 0
        self._inflate: zlib._Decompress | None = None

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``raw``; raises :class:`BodyTooLarge` past the limit."""
        if self._kind == "identity":
            if raw:
                yield self._counted(raw)
            return
        data = raw
        while data:
            if self._inflate is None:
                self._inflate = self._start(data)
            try:
                piece = self._inflate.decompress(data, STEP)
            except zlib.error as exc:
                raise BodyUndecodable(f"the answer's {self._kind} data is corrupt") from exc
            if piece:
                yield self._counted(piece)
            if self._inflate.eof:
                # Concatenated gzip members: the rest starts a new one.
                data = self._inflate.unused_data
                self._inflate = None
            elif self._inflate.unconsumed_tail or len(piece) == STEP:
                # Output held back by the step: the same input again (empty if all consumed).
                data = self._inflate.unconsumed_tail or b""
                if not data:
                    yield from self._drain()
                    return
            else:
                return

    def _drain(self) -> Iterator[bytes]:
        assert self._inflate is not None
        while piece := self._inflate.decompress(b"", STEP):
            yield self._counted(piece)

    def _start(self, data: bytes) -> zlib._Decompress:
        if self._kind == "deflate" and data[:1] != b"\x78":
            return zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send it
        return zlib.decompressobj(zlib.MAX_WBITS | (16 if "gzip" in self._kind else 0))

    def _counted(self, piece: bytes) -> bytes:
        self._total += len(piece)
        if self._total > self._limit:
            raise BodyTooLarge(self._limit)
        return piece


async def read_bounded(content: aiohttp.StreamReader, encoding: str | None, limit: int) -> bytes:
    """The whole body of an aiohttp response opened with ``auto_decompress=False``, decoded."""
    decoder = BoundedDecoder(encoding, limit)
    pieces: list[bytes] = []
    async for raw in content.iter_chunked(READ_CHUNK):
        pieces.extend(decoder.feed(raw))
    return b"".join(pieces)


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, encoding: str | None, limit: int) -> None:
        self._inner = inner
        self._encoding = encoding
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # Made here, so that an encoding not asked for fails where the body is read.
        decoder = BoundedDecoder(self._encoding, self._limit)
        async for raw in self._inner:
            for piece in decoder.feed(raw):
                yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


def bounding_hook(limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """An httpx2 ``response`` event hook: the body is decoded here, bounded, before the client
    reads it (the client's own decoders inflate a piece whole)."""

    async def bound(response: httpx2.Response) -> None:
        stream = response.stream
        if not isinstance(stream, httpx2.AsyncByteStream):
            return
        encoding = response.headers.get("content-encoding")
        if encoding is not None:
            del response.headers["content-encoding"]
        response.stream = _BoundedStream(stream, encoding, limit)

    return bound
