"""Peak resident memory of this process while a block runs, sampled from /proc (Linux).

``ru_maxrss`` is the peak of the whole process's life, which an earlier test may already
have set higher; sampling the current RSS in a thread sees a rise however high the old peak.
Decoding a bomb takes seconds, so a 5 ms sample cannot miss it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """This process's resident set size now."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * _PAGE


@dataclass(slots=True)
class Peak:
    start: int
    peak: int = 0

    @property
    def rise(self) -> int:
        """How far RSS rose above where it was when the block started, in bytes."""
        return max(0, self.peak - self.start)


@contextmanager
def peak_rss(interval: float = 0.005) -> Iterator[Peak]:
    """Sample RSS every ``interval`` seconds while the block runs; read ``.rise`` after it."""
    found = Peak(rss_bytes())
    found.peak = found.start
    done = threading.Event()

    def sample() -> None:
        while not done.wait(interval):
            found.peak = max(found.peak, rss_bytes())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        done.set()
        thread.join()
        found.peak = max(found.peak, rss_bytes())
