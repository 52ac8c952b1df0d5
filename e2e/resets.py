"""Helpers of the declarative-reset scenarios (issue 11): a counted app to reset, the reset asked through
``spec.reset``, its steps followed in ``status.reset``, and the recount checked.

The app is ``operations.counting_app`` with one pod, ``exactly_once_v2`` and no store cache, so every count
update is an output record: after a reset to ``earliest`` the latest count per key equals the records produced
per key (not twice them: state and changelog are gone) and the output holds the backlog's counts twice over.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from e2e import cluster, operations

#: The reset's steps in order (``status.reset.step``; ``streamapp_operator.streamapps.reset.RESET_STEPS``).
STEPS = ("scaleToZero", "awaitStopped", "resetOffsets", "deleteInternalTopics", "deleteLocalState", "scaleBack",
         "done")  # fmt: skip


def start_counted_app(namespace: str, name: str, records: int) -> operations.Load:
    """Topics ``<name>-in``/``-out`` (3 partitions), ``records`` produced, the counting app settled with exact
    output; returns the load (its ``sent`` are the expected counts). The caller deletes the topics."""
    cluster.create_topics({f"{name}-in": 3, f"{name}-out": 3})
    load = operations.Load(f"{name}-in")
    load.produce(records)
    # no store cache: every count update is an output record (the re-read is then countable); the stopped pod's
    # static member is removed by the operator (the group protocol's session timeout is the broker's)
    config = {"statestore.cache.max.bytes": "0"}
    app = operations.counting_app(name, 1, config=config, processingGuarantee="exactly_once_v2")
    cluster.apply(app, namespace)
    operations.wait_settled(namespace, name, 1)
    assert operations.latest_counts(f"{name}-out", load.sent) == dict(load.sent)
    return load


def ask_reset(namespace: str, name: str, nonce: str) -> None:
    """``spec.reset = {nonce, to: earliest}``."""
    cluster.kubectl("patch", "streamapp", name, "-n", namespace, "--type=merge",
                    "-p", json.dumps({"spec": {"reset": {"nonce": nonce, "to": "earliest"}}}))  # fmt: skip


def reset_status(namespace: str, name: str) -> dict[str, Any]:
    """``status.reset`` ({} when absent)."""
    return dict((cluster.get_json("streamapp", name, namespace).get("status") or {}).get("reset") or {})


def step_recorder(namespace: str, name: str, nonce: str, steps: list[str]) -> Callable[[], bool]:
    """A condition for ``cluster.wait_until``: appends each new ``status.reset.step`` to ``steps`` and is true
    once the reset ``nonce`` is done."""

    def done() -> bool:
        reset = reset_status(namespace, name)
        if reset.get("step") and (not steps or steps[-1] != reset["step"]):
            steps.append(reset["step"])
        return reset.get("nonce") == nonce and reset.get("step") == "done"

    return done


def assert_in_order(steps: list[str]) -> None:
    """The steps seen never went back (the polling may skip some)."""
    assert [STEPS.index(step) for step in steps] == sorted(STEPS.index(step) for step in steps), steps


def assert_recounted(namespace: str, name: str, load: operations.Load, records: int) -> None:
    """After a reset to earliest: the app is back at one settled pod, the latest counts are exact (not twice
    them), the input was read again, the reset's events were posted and the StatefulSet asks one replica."""
    operations.wait_settled(namespace, name, 1)
    assert operations.latest_counts(f"{name}-out", load.sent) == dict(load.sent)  # not twice the counts
    assert cluster.count_records(f"{name}-out", 2 * records) >= 2 * records  # the input was read again
    reasons = [e["reason"] for e in cluster.events(name, namespace)]
    assert "ResetOffsets" in reasons and "ResetStateDeleted" in reasons, reasons
    assert cluster.get_json("statefulset", name, namespace)["spec"]["replicas"] == 1
