"""Two replays never write the same history twice (issue 19): an unfinished StreamReplay of the same app, or one
writing the same output topic, refuses a newer one by name before anything runs (``claims.replay_conflicts``
on kopf's ``replay_claims`` index); the older one goes on, and a finished one is in no one's way."""

from __future__ import annotations

import dataclasses
from typing import Any

from replay_fakes import HANDOVER, NS, REPLAY, SECOND_TOPOLOGY, replay_world
from streamapp_operator.streamreplays import claims, handlers
from streamapp_operator.streamreplays.claims import ReplayClaim
from streamapp_operator.streamreplays.reconcile import reconcile_replay

NOW = "2026-01-01T00:00:10Z"
ME = ReplayClaim(NS, "second", "uid-2", "2026-01-01T00:00:05Z", f"{NS}/flights", frozenset({"per-key"}), "")


def other(**changes: Any) -> ReplayClaim:
    first = ReplayClaim(NS, "first", "uid-1", "2026-01-01T00:00:00Z", f"{NS}/flights", frozenset({"a"}), "Running")
    return dataclasses.replace(first, **changes)


def test_an_older_unfinished_replay_of_the_same_app_refuses_the_newer_one_by_name() -> None:
    (problem,) = claims.replay_conflicts(ME, [other()])
    assert problem.reason == "ReplayInProgress"
    assert problem.message.startswith(f"StreamReplay {NS}/first (Running) replays StreamApp {NS}/flights already")


def test_an_older_replay_of_another_app_into_the_same_topic_refuses_it_too() -> None:
    (problem,) = claims.replay_conflicts(ME, [other(app=f"{NS}/orders", sinks=frozenset({"per-key", "b"}))])
    assert problem.message.startswith(f"StreamReplay {NS}/first (Running) writes per-key already")


def test_the_older_replay_goes_on_and_finished_or_unrelated_ones_are_in_no_ones_way() -> None:
    assert claims.replay_conflicts(other(), [ME]) == []  # the newer one never refuses the older
    assert claims.replay_conflicts(ME, [other(phase="Succeeded"), other(phase="Failed")]) == []
    assert claims.replay_conflicts(ME, [other(app=f"{NS}/orders")]) == []
    assert claims.replay_conflicts(ME, [dataclasses.replace(ME)]) == []  # itself


def test_the_index_holds_unfinished_replays_with_their_app_and_sink_topics() -> None:
    meta = {"namespace": NS, "name": "r", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"}
    spec = {"appRef": {"name": "flights"}, "topology": SECOND_TOPOLOGY}
    (claim,) = handlers.replay_claims(meta=meta, spec=spec, status={"phase": "Running"}).values()
    assert (claim.app, claim.sinks, claim.phase) == (f"{NS}/flights", frozenset({"per-key"}), "Running")
    assert handlers.replay_claims(meta=meta, spec=spec, status={"phase": "Succeeded"}) == {}


def test_a_second_handover_of_the_app_fails_before_it_resolves_anything() -> None:
    world, cluster, _ = replay_world()
    running = other(sinks=frozenset({"per-key"}))
    world = dataclasses.replace(world, replays=lambda: [running])
    newer = dataclasses.replace(REPLAY, created="2026-01-01T00:00:05Z")
    result = reconcile_replay(newer, HANDOVER, {}, world, NOW)
    assert result.status["phase"] == "Failed"
    failed = {c["type"]: c for c in result.status["conditions"]}["Failed"]
    assert failed["reason"] == "ReplayInProgress" and f"StreamReplay {NS}/first" in failed["message"]
    assert "resolvedOffsets" not in result.status and cluster.applied == []
