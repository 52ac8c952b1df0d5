"""Upgrade decisions: a compatible topology change rolls; one that breaks state is refused with a condition
naming the change, or runs under a new application id, or after a reset, as spec.upgradePolicy says."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp.dsl import StreamsBuilder
from streamapp.topology import TopologyDescription
from streamapp.topology.compatibility import compare
from streamapp_operator.streamapps.upgrade import UpgradePolicy, decide_upgrade, new_application_id


def color(key: Any, value: Any) -> Any:
    return value


def app(store: str = "counts", filtered: bool = False) -> TopologyDescription:
    builder = StreamsBuilder()
    events = builder.stream("events", key_serde="string", value_serde="json", name="events")
    stream = events.filter(color, name="reds") if filtered else events
    stream.group_by(color, name="by-color").count(name="count", store=store).to_stream(name="changes").to(
        "counts", name="out"
    )
    return builder.build()


def decide(before: TopologyDescription, after: TopologyDescription, policy: UpgradePolicy) -> Any:
    return decide_upgrade(
        compare(before, after), policy, spec_application_id="shop", running_application_id="shop", generation=7
    )


@pytest.mark.parametrize("policy", list(UpgradePolicy))
def test_a_compatible_change_rolls_whatever_the_policy(policy: UpgradePolicy) -> None:
    decision = decide(app(), app(filtered=True), policy)
    assert (decision.action, decision.status, decision.application_id) == ("roll", "True", "shop")
    assert decision.reset is None


def test_an_incompatible_change_is_refused_by_default_with_a_condition_naming_it() -> None:
    decision = decide(app(), app(store="totals"), UpgradePolicy.REFUSE)
    assert (decision.action, decision.status, decision.reason) == ("refuse", "False", "IncompatibleTopologyChange")
    assert "store 'counts' renamed to 'totals'" in decision.message
    assert decision.application_id == "shop"


def test_new_application_id_policy_runs_the_change_under_an_id_of_its_generation() -> None:
    decision = decide(app(), app(store="totals"), UpgradePolicy.NEW_APPLICATION_ID)
    assert (decision.action, decision.application_id) == ("newApplicationId", "shop-g7")
    assert "store 'counts' renamed to 'totals'" in decision.message
    assert new_application_id("shop", 7) == decision.application_id  # the same after an operator restart


def test_reset_policy_asks_for_one_reset_per_generation_to_earliest() -> None:
    decision = decide(app(), app(store="totals"), UpgradePolicy.RESET)
    assert decision.action == "reset"
    assert decision.reset is not None
    assert (decision.reset.nonce, decision.reset.to) == ("upgrade-7", "earliest")
    assert decision.application_id == "shop"
