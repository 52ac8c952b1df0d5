"""Delete the topics tests left on the local broker: every topic except Kafka's internal ones (``__*``) and the
benchmark's cached datasets (``bench-*``).

Tests create topics with unique names and never delete them (a failed test leaves its topics to look at). After a
day of runs a local broker held ~6,000 partitions and answered slower (NOT_LEADER_FOR_PARTITION under load,
benchmarks 3-4x slower). Run ``make purge-topics`` while nothing uses the broker: it deletes the demo's topics
too. CI's broker is fresh and never needs it.

Usage: ``python hack/stack/purge_topics.py [--bootstrap HOST:PORT] [--dry-run] [--force]``. Refuses a broker
that is not on the loopback interface unless ``--force`` is given.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable

from confluent_kafka.admin import AdminClient

KEPT_PREFIXES = ("__", "bench-")
"""Kafka's internal topics and the benchmark's cached inputs (``bench/data.py``)."""
BATCH = 200
"""Topics per DeleteTopics request."""


def topics_to_purge(names: Iterable[str]) -> list[str]:
    """The names not starting with one of ``KEPT_PREFIXES``, sorted."""
    return sorted(name for name in names if not name.startswith(KEPT_PREFIXES))


def is_loopback(bootstrap: str) -> bool:
    """Every ``host:port`` of a bootstrap list is on the loopback interface (127.0.0.0/8, ::1, localhost)."""
    hosts = [server.strip().rsplit(":", 1)[0].strip("[]") for server in bootstrap.split(",") if server.strip()]
    return bool(hosts) and all(h == "localhost" or h == "::1" or h.startswith("127.") for h in hosts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--dry-run", action="store_true", help="list the topics, delete nothing")
    parser.add_argument("--force", action="store_true", help="also purge a broker that is not on 127.0.0.1")
    args = parser.parse_args()
    if not is_loopback(args.bootstrap) and not args.force:
        print(f"refusing to purge {args.bootstrap}: not the local broker (use --force)")
        return 2
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    topics = topics_to_purge(admin.list_topics(timeout=30).topics)
    print(f"{len(topics)} topics to delete on {args.bootstrap}")
    if args.dry_run:
        print("\n".join(topics))
        return 0
    failed = 0
    for start in range(0, len(topics), BATCH):
        futures = admin.delete_topics(topics[start : start + BATCH], operation_timeout=60)
        for topic, future in futures.items():
            try:
                future.result()
            except Exception as exc:  # report every failure, keep deleting the rest
                failed += 1
                print(f"{topic}: {exc}")
    print(f"deleted {len(topics) - failed}, failed {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
