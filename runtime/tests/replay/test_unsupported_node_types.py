"""A node type the replay cannot run is refused naming the node and the reason its family table gives, by the
plan's check, before any Spark job: ``streamapp.replay.translate.check_supported`` (ADR 0005).

No family table refuses a node type today, so one that does is made here with ``FamilyTranslations.unsupported``, as
a family module would write it. (The foreign-key join's limit, a node needing stream time downstream of its
responses, is ``streamapp.replay.stages``': ``test_foreign_key_join_stages.py``.)"""

from __future__ import annotations

from typing import Any

import pytest
from conformance import dsl_functions as fn
from streamapp import StreamsBuilder
from streamapp.replay import ReplayPlan, UnsupportedTopologyError, translate
from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.stateless import FilterNode

S, L = "string", "long"
REASON = "a reason the family table gives"


def _plan() -> ReplayPlan:
    builder = StreamsBuilder()
    builder.stream("numbers", key_serde=S, value_serde=L, name="numbers").filter(fn.is_even, name="evens").to(
        "even-numbers", name="out"
    )
    return ReplayPlan(
        builder.build(),
        {"application.id": "unsupported-nodes"},
        "kafka:9092",
        {"numbers": {0: 0}},
        {"numbers": {0: 10}},
        {"even-numbers": 1},
        "unsupported-1",
    )


@pytest.fixture
def filter_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stateless family's table refusing ``filter``, in the tables ``check_supported`` reads."""
    table = FamilyTranslations("stateless").unsupported(FilterNode, REASON)
    monkeypatch.delitem(translate.TRANSLATIONS, "filter")
    monkeypatch.setitem(translate.UNSUPPORTED, "filter", table["filter"].reason)


class _NoSpark:
    """A SparkSession that fails the test when the replay uses it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the replay used Spark ({name}) before refusing the topology")


@pytest.mark.usefixtures("filter_unsupported")
def test_a_node_type_the_family_table_refuses_is_refused_naming_the_node_and_the_reason() -> None:
    plan = _plan()
    message = "node 'evens': the replay does not support node type 'filter': " + REASON
    with pytest.raises(UnsupportedTopologyError, match=message):
        translate.check_supported(plan.description)
    with pytest.raises(UnsupportedTopologyError, match=message):
        plan.check()


@pytest.mark.usefixtures("filter_unsupported")
def test_a_refused_node_type_stops_the_replay_before_any_spark_job() -> None:
    from streamapp.replay.spark.engine import run_replay

    with pytest.raises(UnsupportedTopologyError, match="node 'evens'"):
        run_replay(_NoSpark(), _plan())  # type: ignore[arg-type]


def test_a_node_type_without_a_translation_is_refused_naming_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(translate.TRANSLATIONS, "filter")
    with pytest.raises(UnsupportedTopologyError, match=r"node 'evens'.*'filter': the replay has no translation for it"):
        translate.check_supported(_plan().description)
