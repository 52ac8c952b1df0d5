"""The rate of a growing count over a recent window: records restored per second, as Kafka Streams'
``restore-rate`` sensor (a rate over its recent samples, not since the start).

Pure: the caller passes the time (monotonic seconds) and the count; nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque

__all__ = ["RATE_WINDOW_S", "RecentRate"]

RATE_WINDOW_S = 10.0
"""Seconds of samples the rate is taken over: long enough to smooth the batches of one poll, short enough
that a restore slowing down (a busy disk, a throttled broker) shows within seconds."""


class RecentRate:
    """Units per second of a count over about the last ``window_s`` seconds.

    Samples closer than ``window_s / 20`` replace the newest one, so at most about 22 are kept whatever the
    call rate. ``rate`` is None until two samples lie apart in time; a count that stops growing lowers the rate
    as its samples age (a stalled restore reaches 0 within ``window_s``).
    """

    def __init__(self, now: float, count: int = 0, window_s: float = RATE_WINDOW_S) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self._window_s = window_s
        self._step_s = window_s / 20
        self._samples: deque[tuple[float, int]] = deque([(now, count)])

    def observe(self, now: float, count: int) -> None:
        """The count is ``count`` at ``now`` (seconds, not before the previous sample)."""
        samples = self._samples
        if len(samples) >= 2 and now - samples[-2][0] < self._step_s:
            samples[-1] = (now, count)
        else:
            samples.append((now, count))
        # keep one sample at or before the window's start: the rate spans the whole window
        while len(samples) > 2 and samples[1][0] <= now - self._window_s:
            samples.popleft()

    def rate(self) -> float | None:
        """Units per second between the oldest kept sample and the newest; None when they are at one time."""
        (first_at, first), (last_at, last) = self._samples[0], self._samples[-1]
        if last_at <= first_at:
            return None
        return max(0.0, (last - first) / (last_at - first_at))
