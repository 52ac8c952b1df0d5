"""Window and suppression builders of the DSL: Kafka Streams' ``TimeWindows``, ``SlidingWindows``,
``SessionWindows``, ``JoinWindows``, ``Suppressed`` and its ``BufferConfig``, and ``EmitStrategy``, with snake_case
names.

Durations are ``int`` milliseconds or ``datetime.timedelta``. Each builder is immutable and turns into the
topology description's model with ``spec()`` (``streamapp.topology.windows``). Invalid arguments raise
ValueError with Kafka's wording (e.g. a non-positive size, an advance larger than the size).

>>> TimeWindows.of_size_and_grace(60_000, 5_000).spec().windows_for(61_000)
[(60000, 120000)]
>>> TimeWindows.of_size_with_no_grace(10).advance_by(5).spec().type
'hopping'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import ClassVar

from pydantic import ValidationError

from streamapp.topology.windows import JoinWindowsSpec, WindowSpec

__all__ = [
    "BufferConfig",
    "Duration",
    "EmitStrategy",
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
class EmitStrategy:
    """When a windowed aggregation forwards its results (Kafka's ``EmitStrategy``, KIP-825), for
    ``TimeWindowedKStream.emit_strategy``.

    ``on_window_update()`` (the default): every update of a window, as it happens (behind the record cache, when
    the cache flushes it). ``on_window_close()``: each window's final aggregate once, when stream time passes the
    window's end plus its grace; the window store is still written per update (Kafka's ``KStreamWindowAggregate``
    with ``StrategyType.ON_WINDOW_CLOSE``; ``KStreamSlidingWindowAggregate`` / ``KStreamSessionWindowAggregate``),
    for ``TimeWindowedKStream`` and ``SessionWindowedKStream``.
    """

    type: str

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        """Forward every update of a window (Kafka's ``EmitStrategy.onWindowUpdate()``)."""
        return cls("on_window_update")

    @classmethod
    def on_window_close(cls) -> EmitStrategy:
        """Forward each window's final result once, after its grace (Kafka's ``EmitStrategy.onWindowClose()``)."""
        return cls("on_window_close")


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
class BufferConfig:
    """How much a suppress node may buffer and what it does when full (Kafka's ``Suppressed.BufferConfig``; also
    reachable as ``Suppressed.BufferConfig``).

    ``max_records``: keys buffered; ``max_bytes``: the buffer's size in bytes (serialized key, new and prior
    values plus 16 bytes per key, ``streamapp.state.suppression_buffer``); ``None`` = no bound. ``when_full``:
    ``"shut_down"`` (strict: a record that overfills the buffer fails and goes to the processing exception
    handler, Kafka's ``shutDownWhenFull``) or ``"emit_early"`` (forward the oldest buffered updates until the
    buffer fits, Kafka's ``emitEarlyWhenFull``). As in Kafka, ``unbounded()`` is strict and ``max_records`` /
    ``max_bytes`` start eager (emit early) until ``shut_down_when_full()``. Negative bounds raise ValueError.
    """

    max_records_limit: int | None = None
    max_bytes_limit: int | None = None
    when_full: str = "shut_down"

    @classmethod
    def unbounded(cls) -> BufferConfig:
        """No bound (Kafka's ``BufferConfig.unbounded()``: strict, the buffer grows with the keys held)."""
        return cls()

    @classmethod
    def max_records(cls, records: int) -> BufferConfig:
        """At most ``records`` keys buffered; emits early when full unless ``shut_down_when_full()``."""
        return cls(None, None, "emit_early").with_max_records(records)

    @classmethod
    def max_bytes(cls, byte_limit: int) -> BufferConfig:
        """At most ``byte_limit`` bytes buffered; emits early when full unless ``shut_down_when_full()``."""
        return cls(None, None, "emit_early").with_max_bytes(byte_limit)

    def with_max_records(self, records: int) -> BufferConfig:
        """This config with at most ``records`` keys buffered."""
        return BufferConfig(_limit(records, "maxRecords"), self.max_bytes_limit, self.when_full)

    def with_max_bytes(self, byte_limit: int) -> BufferConfig:
        """This config with at most ``byte_limit`` bytes buffered."""
        return BufferConfig(self.max_records_limit, _limit(byte_limit, "maxBytes"), self.when_full)

    def with_no_bound(self) -> BufferConfig:
        """No bound, strict (Kafka's ``withNoBound``)."""
        return BufferConfig()

    def shut_down_when_full(self) -> BufferConfig:
        """Strict: a record that overfills the buffer fails (the only mode ``until_window_closes`` accepts)."""
        return BufferConfig(self.max_records_limit, self.max_bytes_limit, "shut_down")

    def emit_early_when_full(self) -> BufferConfig:
        """Eager: forward the oldest buffered updates early until the buffer fits (``until_time_limit`` only)."""
        return BufferConfig(self.max_records_limit, self.max_bytes_limit, "emit_early")

    @property
    def is_strict(self) -> bool:
        """Whether the buffer never emits early (Kafka's ``StrictBufferConfig``)."""
        return self.when_full == "shut_down"

    def node_fields(self) -> dict[str, object]:
        """The ``suppress`` node fields this config sets (``maxRecords``, ``maxBytes``, ``whenFull``)."""
        return {"max_records": self.max_records_limit, "max_bytes": self.max_bytes_limit, "when_full": self.when_full}


def _limit(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative int, got {value!r}")
    return value


_BufferConfig = BufferConfig


@dataclass(frozen=True)
class Suppressed:
    """What ``KTable.suppress`` holds back (Kafka's ``Suppressed``).

    ``until_window_closes(buffer_config)``: each window's final result, once, when the window closes (a windowed
    table only; the buffer must be strict). ``until_time_limit(time_to_wait_for_more_events, buffer_config)``:
    each key's latest update once its record time is that far behind stream time (any table). ``name``: the
    suppress node's name (``with_name``).
    """

    name: str | None = None
    until: str = "window_closes"
    time_limit_ms: int | None = None
    buffer_config: _BufferConfig = field(default_factory=_BufferConfig)

    BufferConfig: ClassVar[type[_BufferConfig]] = _BufferConfig
    """Kafka's ``Suppressed.BufferConfig`` spelling: ``Suppressed.BufferConfig.max_records(n)``."""

    @classmethod
    def until_window_closes(cls, buffer_config: _BufferConfig | None = None) -> Suppressed:
        """Forward only the final result of each window of a windowed table, after its grace period.

        ``buffer_config`` (default ``BufferConfig.unbounded()``) must be strict: ValueError for one that emits
        early (Kafka accepts only a ``StrictBufferConfig`` here)."""
        config = _BufferConfig.unbounded() if buffer_config is None else buffer_config
        if not isinstance(config, _BufferConfig):
            raise TypeError(f"until_window_closes expects a BufferConfig, got {type(config).__name__}")
        if not config.is_strict:
            raise ValueError(
                "until_window_closes needs a strict buffer config: BufferConfig.unbounded() or a bounded one with "
                ".shut_down_when_full() (emitting early would forward results that are not final)"
            )
        return cls(buffer_config=config)

    @classmethod
    def until_time_limit(cls, time_to_wait_for_more_events: Duration, buffer_config: _BufferConfig) -> Suppressed:
        """Forward each key's latest update once its record timestamp is ``time_to_wait_for_more_events`` (ms or
        a timedelta, >= 0) behind stream time; ``buffer_config`` bounds the buffer (Kafka's
        ``Suppressed.untilTimeLimit``). ValueError for a negative time."""
        limit = to_ms(time_to_wait_for_more_events, "timeToWaitForMoreEvents")
        if limit < 0:
            raise ValueError(f"timeToWaitForMoreEvents must not be negative, got {limit} ms")
        if not isinstance(buffer_config, _BufferConfig):
            raise TypeError(f"until_time_limit expects a BufferConfig, got {type(buffer_config).__name__}")
        return cls(until="time_limit", time_limit_ms=limit, buffer_config=buffer_config)

    def with_name(self, name: str) -> Suppressed:
        """Name the suppress node (its buffer store is ``<name>-store``)."""
        return replace(self, name=name)

    def node_fields(self) -> dict[str, object]:
        """The ``suppress`` node fields (``until``, ``timeLimitMs``, buffer bounds) of this suppression."""
        fields = {"until": self.until, "time_limit_ms": self.time_limit_ms, **self.buffer_config.node_fields()}
        defaults = {"time_limit_ms": None, "max_records": None, "max_bytes": None, "when_full": "shut_down"}
        return {key: value for key, value in fields.items() if key not in defaults or value != defaults[key]}
