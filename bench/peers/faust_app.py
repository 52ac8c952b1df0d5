"""The benchmark topologies on Faust (faust-streaming; run with the Faust venv's python).

``stateless``: drop cancelled flights, map each to a 4-field summary, send JSON.
``count``: count flights per tail number (the input key; null keys dropped) in a Faust ``Table`` stored in
RocksDB (rocksdict), send every new count (JSON int).
One agent, the documented ``async for key, value in stream.items()`` / ``await topic.send`` style. Runs as
``faust worker`` until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import faust


def summarize(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "carrier": value["carrier"],
        "flight": value["flight"],
        "route": f"{value['origin']}-{value['dest']}",
        "delay": value.get("dep_delay"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--topology", choices=["stateless", "count"], required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--guarantee", choices=["at_least_once", "exactly_once"], default="at_least_once")
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--state-dir", required=True)
    args = parser.parse_args()
    app = faust.App(
        args.group,
        broker=f"kafka://{args.bootstrap}",
        store="rocksdb://" if args.topology == "count" else "memory://",
        datadir=args.state_dir,
        topic_partitions=args.partitions,
        broker_commit_interval=args.commit_interval_ms / 1000,
        producer_linger_ms=100,
        producer_compression_type="lz4",
        producer_acks=-1,
        consumer_auto_offset_reset="earliest",
        processing_guarantee=args.guarantee,
        web_enabled=False,
        key_serializer="raw",
        value_serializer="raw",
    )
    source = app.topic(args.input, key_type=bytes, value_type=bytes)
    sink = app.topic(args.output, key_type=bytes, value_type=bytes)

    if args.topology == "stateless":

        @app.agent(source)
        async def stateless(stream: Any) -> None:
            async for key, value in stream.items():
                row = json.loads(value)
                if row.get("dep_time") is None:
                    continue
                await sink.send(key=key, value=json.dumps(summarize(row)).encode())

    else:
        counts = app.Table(
            "counts",
            default=int,
            partitions=args.partitions,
            schema=faust.Schema(key_type=bytes, value_type=int, key_serializer="raw", value_serializer="json"),
        )

        @app.agent(source)
        async def count(stream: Any) -> None:
            async for key, _value in stream.items():
                if key is None:
                    continue
                counts[key] += 1
                await sink.send(key=key, value=str(counts[key]).encode())

    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn", "--without-web"]
    app.main()


if __name__ == "__main__":
    main()
