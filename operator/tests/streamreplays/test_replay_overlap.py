"""A backfill over offsets the app already committed needs ``allowOverlap`` (issue 19, audit R19: a backfill with
the app's own topology wrote 2,700 records a second time without a word): the overlap is found before any topic or
Job, named per topic and partition, and refused unless the spec allows it, which a Warning event then says."""

from __future__ import annotations

from typing import Any

from replay_fakes import NS, REPLAY, SECOND_TOPOLOGY, replay_world
from streamapp_operator.streamreplays.overlap import Overlap, overlaps, verdict
from streamapp_operator.streamreplays.reconcile import reconcile_replay

DEFAULT_TOPOLOGY = {"appRef": {"name": "flights"}}  # a backfill through the app's own topology: its own outputs
NEW_TOPICS = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}  # writes per-key, which the app does not
APP_GROUP = "flights"  # the app's application.id: its name


# -- the pure decision ----------------------------------------------------------------------------------------------


def test_the_overlap_is_the_range_below_the_committed_offsets() -> None:
    start, end = {"t": {0: 10, 1: 0, 2: 50}}, {"t": {0: 100, 1: 40, 2: 60}}
    committed = {"t": {0: 30, 1: 80}}  # partition 2 never processed
    assert overlaps(start, end, committed) == [Overlap("t", 0, 10, 30), Overlap("t", 1, 0, 40)]


def test_a_range_from_the_committed_offsets_on_overlaps_nothing() -> None:
    assert overlaps({"t": {0: 30}}, {"t": {0: 90}}, {"t": {0: 30}}) == []
    assert overlaps({"t": {0: 30}}, {"t": {0: 30}}, {"t": {0: 90}}) == []  # an empty range


def test_an_overlap_into_the_apps_own_topics_is_refused_by_partition_unless_allowed() -> None:
    found = [Overlap("flights", 0, 0, 100), Overlap("flights", 1, 5, 90)]
    refused = verdict("flights", "flights", found, ["departures-per-carrier"], allowed=False)
    assert refused.refused
    assert "flights[0] 0-100 (100 records), flights[1] 5-90 (85 records)" in refused.message
    assert "185 records StreamApp flights already processed" in refused.message
    assert "set spec.allowOverlap: true" in refused.message
    allowed = verdict("flights", "flights", found, ["departures-per-carrier"], allowed=True)
    assert not allowed.refused and "allowOverlap: true, so the backfill runs" in allowed.message


def test_an_overlap_into_topics_the_app_does_not_write_rewrites_nothing() -> None:
    found = [Overlap("flights", 0, 0, 100)]
    assert verdict("flights", "flights", found, [], allowed=False).message == ""


# -- the controller -------------------------------------------------------------------------------------------------


def _first(spec: dict[str, Any], committed: dict[str, dict[int, int]] | None) -> tuple[Any, Any, Any]:
    world, cluster, kafka = replay_world()
    if committed is not None:
        kafka.group_offsets[APP_GROUP] = committed
    result = reconcile_replay(REPLAY, spec, {}, world, "2026-01-01T00:00:10Z")
    return result, cluster, kafka


def test_a_backfill_over_the_apps_committed_range_fails_before_any_topic_or_job() -> None:
    result, cluster, kafka = _first(DEFAULT_TOPOLOGY, {"flights": {0: 40, 1: 90}})
    failed = next(c for c in result.status["conditions"] if c["type"] == "Failed")
    assert result.status["phase"] == "Failed" and failed["reason"] == "RangeOverlapsApp"
    assert "flights[0] 0-40 (40 records), flights[1] 5-90 (85 records)" in failed["message"]
    assert "departures-per-carrier" in failed["message"]
    assert ("Job", NS, "flights-v2-replay") not in cluster.objects and "departures-per-carrier" not in kafka.topics


def test_allow_overlap_runs_it_with_a_warning() -> None:
    result, cluster, _ = _first({**DEFAULT_TOPOLOGY, "allowOverlap": True}, {"flights": {0: 40, 1: 90}})
    assert result.status["phase"] == "Running" and ("Job", NS, "flights-v2-replay") in cluster.objects
    warnings = [e for e in result.events if e.reason == "OverlapAllowed"]
    assert len(warnings) == 1 and warnings[0].type == "Warning" and "flights[0] 0-40" in warnings[0].message


def test_a_backfill_into_new_topics_or_of_an_unprocessed_range_runs() -> None:
    for spec, committed in [(NEW_TOPICS, {"flights": {0: 40, 1: 90}}), (DEFAULT_TOPOLOGY, None)]:
        result, _, _ = _first(spec, committed)
        assert result.status["phase"] == "Running"
        assert not [e for e in result.events if e.reason == "OverlapAllowed"]
