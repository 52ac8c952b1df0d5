"""A stage's summary (one Spark job over its persisted output) and the window changelog records a new
version's store would not hold."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamapp.replay.drops import DROPPED_KIND, add_counts
from streamapp.replay.plan import ReplayPlan

__all__ = ["StageSummary", "summarize", "window_retentions", "without_expired_windows"]


def window_retentions(plan: ReplayPlan) -> dict[str, int]:
    """The changelog topic of each window store of ``plan`` (without duplicates: a join buffer's windows are not
    keyed by start alone) -> the store's retention (ms)."""
    return {
        plan.description.changelog_topic(plan.application_id, store.name): store.retention_ms
        for store in plan.description.stores
        if store.type == "window" and not store.retain_duplicates and store.retention_ms is not None
    }


@dataclass(frozen=True)
class StageSummary:
    """A persisted stage's output: its records (drop rows not included), the records it dropped per reason
    (``streamapp.replay.drops``), the ``(kind, (topic, partition))`` its records go to, and per window store
    changelog partition the start below which a window is expired (``without_expired_windows``)."""

    records: int
    dropped: dict[str, int]
    partitions: list[tuple[str, tuple[str, int]]]
    window_horizons: dict[tuple[str, int], int]


def summarize(stage: DataFrame, retentions: Mapping[str, int]) -> StageSummary:
    """``stage``'s summary in one job (which runs and persists the stage): rows per kind and output partition;
    a drop row's ``offset`` is the records it dropped, its ``topic`` the reason. ``retentions``: the window
    stores' changelog topics and retentions (``window_retentions``)."""
    window_changelog = (F.col("kind") == "changelog") & F.col("topic").isin(list(retentions))
    rows = (
        stage.groupBy("kind", "topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum("offset").alias("offsets"),
            F.max(F.when(window_changelog, _window_start(F.col("key")))).alias("last_start"),
        )
        .collect()
    )
    records = 0
    dropped: dict[str, int] = {}
    partitions: list[tuple[str, tuple[str, int]]] = []
    horizons: dict[tuple[str, int], int] = {}
    for row in rows:
        if row["kind"] == DROPPED_KIND:
            add_counts(dropped, {str(row["topic"]): int(row["offsets"])})
            continue
        target = (str(row["topic"]), int(row["partition"]))
        records += int(row["rows"])
        partitions.append((str(row["kind"]), target))
        if row["last_start"] is not None:
            horizons[target] = int(row["last_start"]) - retentions[target[0]]
    return StageSummary(records, dropped, partitions, horizons)


def _window_start(key: Column) -> Column:
    """The window start of a window store's changelog key: ``key bytes + start (8 bytes) + seqnum (4 bytes)``
    (Kafka's ``WindowKeySchema``, ``streamapp.state.window_store``); starts are not negative."""
    return F.conv(F.hex(F.substring(key, -12, 8)), 16, 10).cast("long")


def without_expired_windows(stage: DataFrame, horizons: Mapping[tuple[str, int], int]) -> DataFrame:
    """``stage`` without the changelog records of windows its window stores have expired by the end: a window
    store's observed stream time is the largest window start put into it, and a window with ``start < observed -
    retention`` is hidden and never written again (``streamapp.state.window_store``). A new version restoring the
    changelog therefore sees the same windows with or without them (the latest window is always kept, so its
    observed stream time is the same); the streaming app's changelog holds them until the broker deletes them
    (``retention.ms`` = retention + 1 day). ``horizons``: ``(changelog topic, partition)`` -> the first start kept
    (``summarize``)."""
    expired: Column | None = None
    for topic in sorted({topic for topic, _ in horizons}):
        bounds = [horizons.get((topic, p)) for p in range(max(p for t, p in horizons if t == topic) + 1)]
        bound = F.element_at(F.array(*[F.lit(b).cast("long") for b in bounds]), F.col("partition") + 1)
        condition = (F.col("topic") == topic) & (_window_start(F.col("key")) < bound)
        expired = condition if expired is None else expired | condition
    if expired is None:
        return stage
    return stage.where(~F.coalesce(expired, F.lit(False)))
