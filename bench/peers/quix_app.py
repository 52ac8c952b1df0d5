"""The benchmark topologies on Quix Streams (run with the Quix venv's python; imports nothing from here).

``stateless``: drop cancelled flights, map each to a 4-field summary, write JSON.
``count``: count flights per tail number (the input key; null keys dropped) in Quix's RocksDB state,
write every new count (JSON int).
Runs until SIGTERM (``Application.run`` stops gracefully on it).
"""

from __future__ import annotations

import argparse
from typing import Any

from quixstreams import Application, State


def is_departed(value: dict[str, Any]) -> bool:
    return value.get("dep_time") is not None


def summarize(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "carrier": value["carrier"],
        "flight": value["flight"],
        "route": f"{value['origin']}-{value['dest']}",
        "delay": value.get("dep_delay"),
    }


def has_key(value: Any, key: Any, timestamp: int, headers: Any) -> bool:
    return key is not None


def count(value: Any, state: State) -> int:
    total: int = (state.get("count") or 0) + 1
    state.set("count", total)
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--topology", choices=["stateless", "count"], required=True)
    parser.add_argument("--guarantee", choices=["at-least-once", "exactly-once"], default="at-least-once")
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--state-dir", required=True)
    args = parser.parse_args()
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        commit_interval=args.commit_interval_ms / 1000,
        processing_guarantee=args.guarantee,
        state_dir=args.state_dir,
        producer_extra_config={"linger.ms": 100, "compression.type": "lz4", "partitioner": "murmur2_random"},
        loglevel="WARNING",
        auto_create_topics=True,
    )
    source = app.topic(args.input, key_deserializer="string", value_deserializer="json")
    sink = app.topic(args.output, key_serializer="string", value_serializer="json")
    sdf = app.dataframe(source)
    if args.topology == "stateless":
        sdf = sdf.filter(is_departed).apply(summarize)
    else:
        sdf = sdf.filter(has_key, metadata=True).apply(count, stateful=True)
    sdf.to_topic(sink)
    app.run()


if __name__ == "__main__":
    main()
