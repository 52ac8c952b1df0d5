"""Window and suppression builders of the DSL: Kafka Streams' ``TimeWindows``, ``SlidingWindows``,
``SessionWindows``, ``JoinWindows`` and ``Suppressed``, with snake_case names.

Durations are ``int`` milliseconds or ``datetime.timedelta``. Each builder is immutable and turns into the
topology description's model with ``spec()`` (``streamapp.topology.windows``). Invalid arguments raise
ValueError with Kafka's wording (e.g. a non-positive size, an advance larger than the size).

>>> TimeWindows.of_size_and_grace(60_000, 5_000).spec().windows_for(61_000)
[(60000, 120000)]
>>> TimeWindows.of_size_with_no_grace(10).advance_by(5).spec().type
'hopping'
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from pydantic import ValidationError

from streamapp.topology.windows import JoinWindowsSpec, WindowSpec

__all__ = [
    "Duration",
    "JoinWindows",
    "SessionWindows",
    "SlidingWindows",
    "Suppressed",
    "TimeWindows",
    "to_ms",
]

Duration = int | timedelta
"""Milliseconds as an ``int``, or a ``timedelta`` (whole milliseconds)."""


def to_ms(duration: Duration, what: str) -> int:
    """``duration`` in whole milliseconds; ValueError for fractions of a millisecond or other types."""
    if isinstance(duration, timedelta):
        micros = duration // timedelta(microseconds=1)
        if micros % 1000:
            raise ValueError(f"{what} must be a whole number of milliseconds, got {duration}")
        return micros // 1000
    if isinstance(duration, bool) or not isinstance(duration, int):
        raise ValueError(f"{what} must be milliseconds (int) or a timedelta, got {type(duration).__name__}")
    return duration


def _spec(**fields: object) -> WindowSpec:
    try:
        return WindowSpec.model_validate(fields)
    except ValidationError as exc:
        raise _value_error(exc) from None


def _value_error(exc: ValidationError) -> ValueError:
    """One ValueError naming each failing field in its camelCase form (``'graceMs': ...``)."""
    problems = []
    for error in exc.errors():
        message = error["msg"].removeprefix("Value error, ")
        field = ".".join(str(part) for part in error["loc"])
        problems.append(f"'{_camel(field)}': {message}" if field else message)
    return ValueError("; ".join(problems))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True)
class TimeWindows:
    """Fixed-size windows aligned to the epoch: tumbling, or hopping after ``advance_by`` (Kafka's
    ``TimeWindows``). A window ``[start, start + size)`` closes ``grace`` ms after its end."""

    size_ms: int
    advance_ms: int
    grace_ms: int

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` without grace (a record after a window's end is late)."""
        return cls.of_size_and_grace(size, 0)

    @classmethod
    def of_size_and_grace(cls, size: Duration, after_window_end: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` that accept late records until ``after_window_end`` past their end."""
        size_ms = to_ms(size, "size")
        windows = cls(size_ms, size_ms, to_ms(after_window_end, "afterWindowEnd"))
        windows.spec()
        return windows

    of_size_with_grace = of_size_and_grace
    """Alias of ``of_size_and_grace``."""

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: a new window every ``advance`` (``0 < advance <= size``)."""
        windows = TimeWindows(self.size_ms, to_ms(advance, "advance"), self.grace_ms)
        windows.spec()
        return windows

    def spec(self) -> WindowSpec:
        if self.advance_ms == self.size_ms:
            return _spec(type="tumbling", size_ms=self.size_ms, grace_ms=self.grace_ms)
        return _spec(type="hopping", size_ms=self.size_ms, advance_ms=self.advance_ms, grace_ms=self.grace_ms)


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of length ``time_difference`` created at record times (Kafka's ``SlidingWindows``): two records
    share a window when they are at most ``time_difference`` ms apart."""

    time_difference_ms: int
    grace_ms: int

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> SlidingWindows:
        return cls.of_time_difference_and_grace(time_difference, 0)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, after_window_end: Duration) -> SlidingWindows:
        windows = cls(to_ms(time_difference, "timeDifference"), to_ms(after_window_end, "afterWindowEnd"))
        windows.spec()
        return windows

    def spec(self) -> WindowSpec:
        return _spec(type="sliding", time_difference_ms=self.time_difference_ms, grace_ms=self.grace_ms)


@dataclass(frozen=True)
class SessionWindows:
    """Sessions of activity separated by gaps longer than ``inactivity_gap`` (Kafka's ``SessionWindows``)."""

    gap_ms: int
    grace_ms: int

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, inactivity_gap: Duration) -> SessionWindows:
        return cls.of_inactivity_gap_and_grace(inactivity_gap, 0)

    @classmethod
    def of_inactivity_gap_and_grace(cls, inactivity_gap: Duration, after_window_end: Duration) -> SessionWindows:
        windows = cls(to_ms(inactivity_gap, "inactivityGap"), to_ms(after_window_end, "afterWindowEnd"))
        windows.spec()
        return windows

    def spec(self) -> WindowSpec:
        return _spec(type="session", gap_ms=self.gap_ms, grace_ms=self.grace_ms)


@dataclass(frozen=True)
class JoinWindows:
    """The time bounds of a stream-stream join (Kafka's ``JoinWindows``): a left record at ``t`` joins right
    records in ``[t - before, t + after]``."""

    before_ms: int
    after_ms: int
    grace_ms: int

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> JoinWindows:
        return cls.of_time_difference_and_grace(time_difference, 0)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, after_window_end: Duration) -> JoinWindows:
        difference = to_ms(time_difference, "timeDifference")
        windows = cls(difference, difference, to_ms(after_window_end, "afterWindowEnd"))
        windows.spec()
        return windows

    def before(self, time_difference: Duration) -> JoinWindows:
        """The same windows with another lower bound ``before`` (ms before the left record)."""
        windows = JoinWindows(to_ms(time_difference, "timeDifference"), self.after_ms, self.grace_ms)
        windows.spec()
        return windows

    def after(self, time_difference: Duration) -> JoinWindows:
        """The same windows with another upper bound ``after`` (ms after the left record)."""
        windows = JoinWindows(self.before_ms, to_ms(time_difference, "timeDifference"), self.grace_ms)
        windows.spec()
        return windows

    def spec(self) -> JoinWindowsSpec:
        try:
            return JoinWindowsSpec(before_ms=self.before_ms, after_ms=self.after_ms, grace_ms=self.grace_ms)
        except ValidationError as exc:
            raise _value_error(exc) from None


@dataclass(frozen=True)
class Suppressed:
    """What ``KTable.suppress`` holds back (Kafka's ``Suppressed``). Only ``until_window_closes`` with an
    unbounded buffer: each window's final result, once, when the window closes."""

    name: str | None = None

    @classmethod
    def until_window_closes(cls) -> Suppressed:
        """Forward only the final result of each window of a windowed table, after its grace period."""
        return cls()

    def with_name(self, name: str) -> Suppressed:
        """Name the suppress node (its buffer store is ``<name>-store``)."""
        return Suppressed(name)
