"""The per-route rate window, and how a burst and a long text read."""

from __future__ import annotations

from gateway.platforms.webhooks.coalescing import RateWindow, capped, joined_burst


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_window_refuses_past_the_limit_and_says_when_to_come_back() -> None:
    clock = Clock()
    window = RateWindow(2, clock)
    assert window.take() is None
    clock.now += 10
    assert window.take() is None
    assert window.take() == 50.0  # the first one leaves the window 60 s after it came


def test_the_window_slides() -> None:
    clock = Clock()
    window = RateWindow(1, clock)
    assert window.take() is None
    clock.now += 60
    assert window.take() is None


def test_a_refused_request_does_not_count() -> None:
    clock = Clock()
    window = RateWindow(1, clock)
    window.take()
    for _ in range(5):
        assert window.take() is not None
    clock.now += 60
    assert window.take() is None


def test_one_delivery_reads_as_itself_and_a_burst_is_counted_and_kept_in_order() -> None:
    assert joined_burst(["only"]) == "only"
    burst = joined_burst(["first", "second"])
    assert burst.startswith("2 webhook deliveries:") and burst.index("first") < burst.index("second")


def test_a_long_text_is_cut_to_the_limit_saying_so() -> None:
    text = capped("z" * 1000, 120)
    assert len(text) <= 120 and text.endswith("[cut: the first 80 of 1,000 characters]")
    assert text.startswith("z" * 80 + "\n")
    assert capped("short", 120) == "short"
