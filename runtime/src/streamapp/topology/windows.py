"""Window specifications of a topology description (the windowed nodes: ``streamapp.topology.nodes.windowed``).

Window specs (all times in milliseconds, camelCase in documents):

=========  ===========================================  ===========================================================
type       fields                                       windows of a record at time ``t`` (Kafka class)
=========  ===========================================  ===========================================================
tumbling   sizeMs, graceMs                              ``[s, s + size)`` with ``s = t - t % size`` (``TimeWindows``,
                                                        advance = size)
hopping    sizeMs, advanceMs (<= sizeMs), graceMs       every ``[s, s + size)`` with ``s`` a multiple of advance,
                                                        ``s >= 0`` and ``s <= t < s + size`` (``TimeWindows``)
sliding    timeDifferenceMs, graceMs                    ``[s, s + timeDifference]`` (inclusive) windows created at
                                                        record times (``SlidingWindows``)
session    gapMs, graceMs                               ``[first, last]`` of records no more than gap apart
                                                        (``SessionWindows``)
=========  ===========================================  ===========================================================

A record is *late* and dropped (counted in ``dropped-records``) when its window is closed: for time windows
when ``windowEnd + grace <= streamTime``, for sliding windows when ``windowEnd + grace < streamTime`` (the end is
inclusive), for session windows when ``sessionEnd + gap + grace < streamTime`` (KAFKA-12718), where stream time
is the largest record timestamp the processor has seen (Kafka's ``observedStreamTime``).

Join windows (``JoinWindowsSpec``: beforeMs, afterMs, graceMs; Kafka's ``JoinWindows``) are used by the
stream-stream join nodes (``streamapp.topology.nodes.joins``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from streamapp.topology.document import DescriptionModel

__all__ = ["JoinWindowsSpec", "WindowSpec", "WindowType"]

WindowType = Literal["tumbling", "hopping", "sliding", "session"]

_FIELDS_BY_TYPE: dict[str, tuple[set[str], set[str]]] = {
    # type: (required fields, allowed optional fields) besides graceMs
    "tumbling": ({"size_ms"}, {"advance_ms"}),
    "hopping": ({"size_ms", "advance_ms"}, set()),
    "sliding": ({"time_difference_ms"}, set()),
    "session": ({"gap_ms"}, set()),
}


class WindowSpec(DescriptionModel):
    """How a grouped stream is cut into windows; all durations in milliseconds.

    Raises ValueError (a TopologyError when parsed in a description) naming the field for a missing or
    extra field for the type, a non-positive size/advance/gap, an advance larger than the size, or a
    negative time difference or grace.
    """

    type: WindowType
    size_ms: int | None = None
    advance_ms: int | None = None
    time_difference_ms: int | None = None
    gap_ms: int | None = None
    grace_ms: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_fields(self) -> WindowSpec:
        required, optional = _FIELDS_BY_TYPE[self.type]
        given = {
            name
            for name in ("size_ms", "advance_ms", "time_difference_ms", "gap_ms")
            if getattr(self, name) is not None
        }
        for name in sorted(required - given):
            raise ValueError(f"a {self.type} window needs '{_camel(name)}'")
        for name in sorted(given - required - optional):
            raise ValueError(f"'{_camel(name)}' does not apply to a {self.type} window")
        if self.size_ms is not None and self.size_ms <= 0:
            raise ValueError(f"'sizeMs' must be larger than zero, got {self.size_ms}")
        if self.advance_ms is not None and self.size_ms is not None:
            if self.type == "tumbling" and self.advance_ms != self.size_ms:
                raise ValueError("a tumbling window advances by its size; use type hopping for another advanceMs")
            if not 0 < self.advance_ms <= self.size_ms:
                raise ValueError(
                    f"'advanceMs' must be larger than zero and at most sizeMs ({self.size_ms}), got {self.advance_ms}"
                )
        if self.time_difference_ms is not None and self.time_difference_ms < 0:
            raise ValueError(f"'timeDifferenceMs' must not be negative, got {self.time_difference_ms}")
        if self.gap_ms is not None and self.gap_ms <= 0:
            raise ValueError(f"'gapMs' must be larger than zero, got {self.gap_ms}")
        return self

    # -- derived values ----------------------------------------------------------------------------

    @property
    def is_time_window(self) -> bool:
        """Tumbling or hopping (Kafka's ``TimeWindows``)."""
        return self.type in ("tumbling", "hopping")

    @property
    def advance(self) -> int:
        """Hop of a time window in ms (= size for tumbling); ValueError for sliding and session windows."""
        if not self.is_time_window:
            raise ValueError(f"a {self.type} window has no advance")
        return self.advance_ms if self.advance_ms is not None else self.size

    @property
    def size(self) -> int:
        """Length of a time window, or the time difference of a sliding window, in ms (``end - start``);
        ValueError for session windows, whose length varies."""
        if self.type == "sliding":
            assert self.time_difference_ms is not None
            return self.time_difference_ms
        if self.type == "session":
            raise ValueError("a session window has no fixed size")
        assert self.size_ms is not None
        return self.size_ms

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        """``[(start, end)]`` of the time windows containing ``timestamp`` (ms), oldest first.

        Kafka's ``TimeWindows.windowsFor``: starts are multiples of the advance, never negative, so a
        negative timestamp has no window. ValueError for sliding and session windows.
        """
        size, advance = self.size, self.advance
        start = (max(0, timestamp - size + advance) // advance) * advance
        windows: list[tuple[int, int]] = []
        while start <= timestamp:
            windows.append((start, start + size))
            start += advance
        return windows

    def close_grace_ms(self) -> int:
        """How long after a window's end it stays open, in ms: the grace, plus the gap for session windows.

        This is the ``suppress(until_window_closes)`` wait (Kafka's ``GraphGraceSearchUtil``).
        """
        if self.type == "session":
            assert self.gap_ms is not None
            return self.grace_ms + self.gap_ms
        return self.grace_ms

    def min_retention_ms(self) -> int:
        """The smallest legal store retention, in ms; also the default (Kafka's store materializers):
        size + grace (time windows), 2 x time difference + grace (sliding), gap + grace (session)."""
        if self.type == "sliding":
            return 2 * self.size + self.grace_ms
        if self.type == "session":
            assert self.gap_ms is not None
            return self.gap_ms + self.grace_ms
        return self.size + self.grace_ms

    def store_type(self) -> Literal["window", "session"]:
        """The store type this window needs: ``session`` for session windows, else ``window``."""
        return "session" if self.type == "session" else "window"


class JoinWindowsSpec(DescriptionModel):
    """Kafka's ``JoinWindows``: a record at ``t`` joins records of the other side in ``[t - before, t + after]``.

    All in ms; ``before + after >= 0`` and ``grace >= 0`` (ValueError otherwise). A join store keeps
    ``size + grace`` ms (``store_retention_ms``), with window size ``before + after`` and duplicates retained.
    """

    before_ms: int
    after_ms: int
    grace_ms: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_interval(self) -> JoinWindowsSpec:
        if self.before_ms + self.after_ms < 0:
            raise ValueError("the window interval (beforeMs + afterMs) must not be negative")
        return self

    @property
    def size(self) -> int:
        """``before + after`` in ms (Kafka's ``JoinWindows.size()``)."""
        return self.before_ms + self.after_ms

    def store_retention_ms(self) -> int:
        """Retention of the join's window stores: ``size + grace`` ms (Kafka's ``KStreamImplJoin``)."""
        return self.size + self.grace_ms


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
