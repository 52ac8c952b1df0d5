"""The walking-skeleton scenario on the real stack: Kafka, Kubernetes control plane, node agent, image, chart.

Guarantees protected:
- the flights StreamApp (2 pods x 2 stream threads) computes exactly pandas' per-carrier counts;
- after ``kubectl scale streamapp --replicas=3`` and a rebalance, a second batch (event times + 1 year) is
  counted on top with no loss and no double counting;
- ``kubectl get streamapps`` shows READY r/n, LAG and AGE.
"""

from __future__ import annotations

import pytest

from e2e import cluster, demo, flights

pytestmark = pytest.mark.e2e


def printed_columns(namespace: str) -> dict[str, str]:
    """The ``kubectl get streamapps`` row of the flights app, keyed by column header."""
    lines = cluster.kubectl("get", "streamapps", "-n", namespace).splitlines()
    header = lines[0].split()
    row = next(line.split() for line in lines[1:] if line.startswith(demo.APP))
    return dict(zip(header, row, strict=True))


def test_flights_counts_stay_exact_across_scale_out(operator_installed: None) -> None:
    namespace = "default"
    demo.reset_example(namespace)
    demo.apply_example(namespace)

    assert demo.produce_batch(shift_years=0) == 336_776
    demo.wait_settled(replicas=2, namespace=namespace)
    first = flights.read_counts(cluster.stack_env()["KAFKA_BOOTSTRAP"])
    assert first == flights.expected_counts([flights.load_flights(0)])

    columns = printed_columns(namespace)
    assert columns["READY"] == "2/2"
    assert columns["LAG"] == "0"
    assert "AGE" in columns

    cluster.kubectl("scale", "streamapp", demo.APP, "-n", namespace, "--replicas=3")
    cluster.wait_until(
        lambda: cluster.get_json("statefulset", demo.APP, namespace)["spec"]["replicas"] == 3,
        120,
        "the StatefulSet to follow the StreamApp's scale",
    )
    assert demo.produce_batch(shift_years=1) == 336_776
    demo.wait_settled(replicas=3, namespace=namespace)
    both = flights.read_counts(cluster.stack_env()["KAFKA_BOOTSTRAP"])
    assert both == flights.expected_counts([flights.load_flights(0), flights.load_flights(1)])
    assert printed_columns(namespace)["READY"] == "3/3"
