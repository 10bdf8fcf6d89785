"""Reading a text attachment, the same way on every platform: binary refused, the text capped with a note."""

from __future__ import annotations

MAX_DOWNLOAD_BYTES = 5_000_000
"""Files above this are not fetched at all (noted as too large to read)."""
MAX_TEXT_BYTES = 200_000
"""Of a text file, this much is kept (the rest is noted); the gateway caps characters again."""


def looks_binary(data: bytes) -> bool:
    """A NUL in the first 8 KB: not text, whatever its name says."""
    return b"\x00" in data[:8192]


def decode_capped(data: bytes, cap: int) -> tuple[str, str | None]:
    """The text of ``data`` up to ``cap`` bytes, and a note saying how much was kept when cut."""
    if len(data) <= cap:
        return data.decode("utf-8-sig", errors="replace"), None
    cut = cap
    while cut > 0 and (data[cut] & 0xC0) == 0x80:  # do not cut inside a UTF-8 sequence
        cut -= 1
    text = data[:cut].decode("utf-8-sig", errors="replace")
    return text, f"kept the first {cut:,} of {len(data):,} bytes"
