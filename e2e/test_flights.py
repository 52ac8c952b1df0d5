"""The walking-skeleton scenario on the real stack: Kafka, Kubernetes control plane, node agent, image, chart.

Guarantees protected:
- the flights StreamApp (2 pods x 2 stream threads) computes exactly pandas' per-carrier counts;
- after ``kubectl scale streamapp --replicas=3`` and a rebalance, a second batch (event times + 1 year) is
  counted on top with no loss and no double counting;
- ``kubectl get streamapps`` shows READY r/n, LAG and AGE;
- the installed operator (chart RBAC, in-cluster) keeps a PodDisruptionBudget that lets a drain evict exactly
  one of the ready pods at a time, and reads the pods' /status: ``Restoring`` is False once they are ready.
"""

from __future__ import annotations

import re

import pytest

from e2e import cluster, demo, flights

pytestmark = pytest.mark.e2e


def printed_columns(namespace: str) -> dict[str, str]:
    """The ``kubectl get streamapps`` row of the flights app, keyed by column header."""
    lines = cluster.kubectl("get", "streamapps", "-n", namespace).splitlines()
    row = next(line for line in lines[1:] if line.startswith(demo.APP))
    # Columns by the header's positions: a column with no value (RESTORE when nothing restores) prints blank.
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    ends = [*starts[1:], None]
    return {lines[0][s:e].strip(): row[s:e].strip() for s, e in zip(starts, ends, strict=True)}


def assert_one_pod_may_be_evicted(namespace: str, replicas: int) -> None:
    """The disruption controller counts every ready pod and allows exactly one eviction; nothing restores."""

    def budget_status() -> dict[str, object]:
        status: dict[str, object] = cluster.get_json("poddisruptionbudget", demo.APP, namespace).get("status", {})
        return status

    cluster.wait_until(
        lambda: budget_status().get("currentHealthy") == replicas and budget_status().get("disruptionsAllowed") == 1,
        60,
        f"the PodDisruptionBudget to count {replicas} healthy pods and allow 1 disruption",
    )
    assert cluster.get_json("streamapp", demo.APP, namespace)["status"]["disruptionBudget"] == "maxUnavailable=1"

    def restoring() -> dict[str, str]:
        conditions = cluster.get_json("streamapp", demo.APP, namespace)["status"]["conditions"]
        return dict(next(c for c in conditions if c["type"] == "Restoring"))

    cluster.wait_until(
        lambda: (restoring()["status"], restoring()["reason"]) == ("False", "NoRestore"),
        30,
        "Restoring=False once every pod is ready",
        describe=lambda: str(restoring()),
    )


def test_flights_counts_stay_exact_across_scale_out(operator_installed: None) -> None:
    namespace = "default"
    demo.reset_example(namespace)
    demo.apply_example(namespace)

    assert demo.produce_batch(shift_years=0) == 336_776
    demo.wait_settled(replicas=2, namespace=namespace)
    first = flights.read_counts(cluster.stack_env()["KAFKA_BOOTSTRAP"])
    assert first == flights.expected_counts([flights.load_flights(0)]), cluster.pod_log_problems(demo.APP, namespace)

    columns = printed_columns(namespace)
    assert columns["READY"] == "2/2"
    assert columns["LAG"] == "0"
    assert "AGE" in columns
    assert_one_pod_may_be_evicted(namespace, replicas=2)

    cluster.kubectl("scale", "streamapp", demo.APP, "-n", namespace, "--replicas=3")
    cluster.wait_until(
        lambda: cluster.get_json("statefulset", demo.APP, namespace)["spec"]["replicas"] == 3,
        120,
        "the StatefulSet to follow the StreamApp's scale",
    )
    assert demo.produce_batch(shift_years=1) == 336_776
    demo.wait_settled(replicas=3, namespace=namespace)
    both = flights.read_counts(cluster.stack_env()["KAFKA_BOOTSTRAP"])
    expected_both = flights.expected_counts([flights.load_flights(0), flights.load_flights(1)])
    assert both == expected_both, cluster.pod_log_problems(demo.APP, namespace)
    assert printed_columns(namespace)["READY"] == "3/3"
    assert_one_pod_may_be_evicted(namespace, replicas=3)
