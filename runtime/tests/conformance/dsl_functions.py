"""User functions and processors of the dsl-core conformance topologies (``conformance.dsl_functions:<name>``).

Module-level so both engines import them by reference (the broker engine's ``streamapp run`` process
through its PYTHONPATH).
"""

from __future__ import annotations

from typing import Any

from streamapp.processor import (
    Cancellable,
    FixedKeyProcessor,
    FixedKeyProcessorContext,
    FixedKeyRecord,
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
)

# -- plain functions -------------------------------------------------------------------------------


def is_even(key: Any, value: int) -> bool:
    return value % 2 == 0


def is_large(key: Any, value: int) -> bool:
    return value >= 100


def is_positive(key: Any, value: int) -> bool:
    return value > 0


def swap(key: Any, value: Any) -> tuple[Any, Any]:
    return str(value), key


def words(key: Any, value: str) -> list[tuple[str, int]]:
    return [(word, 1) for word in value.split()]


def split_words(value: str) -> list[str]:
    return value.split()


def times_ten(value: int) -> int:
    return value * 10


def upper(value: str) -> str:
    return value.upper()


def parity_topic(key: Any, value: int) -> str:
    """Routes to ``<prefix>-even`` / ``<prefix>-odd``: the prefix is the key's part before ':'."""
    prefix = str(key).split(":", 1)[0]
    return f"{prefix}-{'even' if value % 2 == 0 else 'odd'}"


def add(aggregate: int, value: int) -> int:
    return aggregate + value


def subtract(aggregate: int, value: int) -> int:
    return aggregate - value


def empty_list() -> list[Any]:
    return []


def append_value(key: Any, value: Any, aggregate: list[Any]) -> list[Any]:
    return [*aggregate, value]


def remove_value(key: Any, value: Any, aggregate: list[Any]) -> list[Any]:
    rest = list(aggregate)
    rest.remove(value)
    return rest


def region_of(key: Any, value: dict[str, Any]) -> tuple[str, str]:
    """``(region, user)``: a user row re-keyed by its region."""
    return value["region"], key


def zero() -> int:
    return 0


def add_amount(key: Any, value: dict[str, Any], total: int) -> int:
    return total + int(value["amount"])


def sub_amount(key: Any, value: dict[str, Any], total: int) -> int:
    return total - int(value["amount"])


def amount_by_region(key: Any, value: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return value["region"], value


# -- Processor API ----------------------------------------------------------------------------------


class Dedupe(Processor):
    """Forwards the first record of each key; remembers keys in store ``seen`` (key -> first timestamp)."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.seen = context.get_state_store("seen")

    def process(self, record: Record) -> None:
        if self.seen.put_if_absent(record.key, record.timestamp) is None:
            self.context.forward(record)


class StreamTimeTotals(Processor):
    """Adds values per key in store ``totals``; every 10 ms of stream time forwards each touched key's total
    as ``(key, total)`` with the punctuation's timestamp, then forgets that it was touched."""

    INTERVAL_MS = 10

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.totals = context.get_state_store("totals")
        self.touched: list[str] = []
        context.schedule(self.INTERVAL_MS, PunctuationType.STREAM_TIME, self.emit)

    def process(self, record: Record) -> None:
        self.totals.put(record.key, (self.totals.get(record.key) or 0) + record.value)
        if record.key not in self.touched:
            self.touched.append(record.key)

    def emit(self, timestamp: int) -> None:
        for key in self.touched:
            self.context.forward(key, self.totals.get(key))
        self.touched.clear()


class WallClockTicks(Processor):
    """Every second of wall-clock time forwards ``("tick", <records seen since the last tick>)``; the first
    tick cancels nothing, the third cancels the schedule."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.seen = 0
        self.ticks = 0
        self.schedule: Cancellable = context.schedule(1_000, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record: Record) -> None:
        self.seen += 1

    def tick(self, timestamp: int) -> None:
        self.ticks += 1
        self.context.forward("tick", self.seen)
        self.seen = 0
        if self.ticks == 3:
            self.schedule.cancel()


class KeyByValue(Processor):
    """Forwards ``(value, key)`` records: the Processor API may change the key."""

    def process(self, record: Record) -> None:
        self.context.forward(record.with_key(str(record.value)).with_value(record.key))


LIFECYCLE: list[str] = []
"""What ``Lifecycle`` instances did, in order (in-process driver tests only)."""


class Lifecycle(Processor):
    """Records ``init <task>``, ``process <key>`` and ``close`` in ``LIFECYCLE``."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        LIFECYCLE.append(f"init {context.task_id} {context.application_id}")

    def process(self, record: Record) -> None:
        LIFECYCLE.append(f"process {record.key}")

    def close(self) -> None:
        LIFECYCLE.append("close")


class RunningTotal(FixedKeyProcessor):
    """A ``process_values`` processor: forwards each record with its key's running total (store ``totals``) as value."""

    def init(self, context: FixedKeyProcessorContext) -> None:
        super().init(context)
        self.totals = context.get_state_store("totals")

    def process(self, record: FixedKeyRecord) -> None:
        total = (self.totals.get(record.key) or 0) + record.value
        self.totals.put(record.key, total)
        self.context.forward(record.with_value(total))


class ForwardsANewKey(FixedKeyProcessor):
    """A ``process_values`` processor that tries to forward a ``Record`` with another key (the runtime refuses)."""

    def process(self, record: FixedKeyRecord) -> None:
        self.context.forward(Record("other", record.value, record.timestamp))  # type: ignore[arg-type]


class NotAProcessor:
    """Not a ``Processor`` subclass: a process node naming it fails when its task builds."""


def swap_key_parity(key: Any, value: int) -> str:
    """The new key ``"even"`` / ``"odd"`` of a number."""
    return "even" if value % 2 == 0 else "odd"


def first_letter(key: Any, value: Any) -> str:
    return str(key)[0]
