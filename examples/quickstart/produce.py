"""Produce sample page views to the topic clicks: python produce.py [COUNT] (default 200)."""

import json
import random
import sys
import time

from confluent_kafka import Producer

USERS = ["ann", "bob", "cid", "dee"]
PAGES = ["/", "/Home/", "/cart?ref=ad", "/checkout", "/search?q=kafka"]


def main(count: int) -> None:
    rng = random.Random(7)
    producer = Producer({"bootstrap.servers": "127.0.0.1:9092"})
    start = int(time.time() * 1000) - count * 1_000  # one view a second, ending now
    for n in range(count):
        agent = "Googlebot" if n % 10 == 0 else "Firefox"
        view = {"page": rng.choice(PAGES), "agent": agent, "ts": start + n * 1_000}
        producer.produce("clicks", key=rng.choice(USERS), value=json.dumps(view))
    producer.flush()
    print(f"produced {count} page views to clicks")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
