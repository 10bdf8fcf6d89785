"""Which adapter sends for a platform in this process: the elected intake when it runs here
(it holds state only it can use, such as Discord interaction tokens), else the send-only one."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from gateway.platforms.base import PlatformAdapter


class SendRoutes(Mapping[str, PlatformAdapter]):
    """A live view: ``routes[platform]`` changes as this process gains or loses an intake."""

    def __init__(
        self,
        senders: Mapping[str, PlatformAdapter],
        intake: Callable[[str], PlatformAdapter | None],
        platforms: list[str],
    ) -> None:
        self._senders = senders
        self._intake = intake
        self._platforms = list(dict.fromkeys(platforms))

    def __getitem__(self, platform: str) -> PlatformAdapter:
        running = self._intake(platform)
        if running is not None:
            return running
        return self._senders[platform]

    def __iter__(self) -> Iterator[str]:
        return iter([p for p in self._platforms if p in self._senders or self._intake(p) is not None])

    def __len__(self) -> int:
        return len(list(iter(self)))
