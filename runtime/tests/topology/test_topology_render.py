"""The text description shows what Kafka Streams' TopologyDescription shows, plus internal topics and tasks."""

from __future__ import annotations

from streamapp.topology import TopologyDescription
from streamapp.topology.render import describe
from topology_samples import flights_doc

FLIGHTS_TEXT = """\
Topologies:
   Sub-topology: 0
    Source: flights (topics: [flights])
      --> departed
    Processor: departed (type: filter, stores: [])
      --> per-carrier-key
      <-- flights
    Processor: per-carrier-key (type: select_key, stores: [])
      --> per-carrier
      <-- departed
    Sink: per-carrier (topic: fpc-per-carrier-repartition)
      <-- per-carrier-key

   Sub-topology: 1
    Source: per-carrier (topics: [fpc-per-carrier-repartition])
      --> count
    Processor: count (type: count, stores: [departures-per-carrier-store])
      --> changes
      <-- per-carrier
    Processor: changes (type: to_stream, stores: [])
      --> out
      <-- count
    Sink: out (topic: departures-per-carrier)
      <-- changes

Stores:
  departures-per-carrier-store (key_value, string -> long), sub-topology 1, changelog: \
fpc-departures-per-carrier-store-changelog
Internal topics:
  fpc-per-carrier-repartition (partitions: 2, cleanup.policy=delete, retention.ms=-1)
  fpc-departures-per-carrier-store-changelog (partitions: 2, cleanup.policy=compact)
Tasks:
  sub-topology 0: 0_0, 0_1
  sub-topology 1: 1_0, 1_1
"""


def test_description_text_lists_sub_topologies_nodes_stores_internal_topics_and_tasks() -> None:
    desc = TopologyDescription.from_dict(flights_doc())

    assert describe(desc, "fpc", {"flights": 2}) == FLIGHTS_TEXT


def test_description_text_without_counts_says_which_partitions_to_pass() -> None:
    text = describe(TopologyDescription.from_dict(flights_doc()))

    assert "Sink: per-carrier (topic: <application.id>-per-carrier-repartition)" in text
    assert "  <application.id>-per-carrier-repartition (partitions: unknown)" in text
    assert text.endswith("Tasks:\n  unknown; pass --partitions flights=N\n")


def test_description_text_reports_a_co_partitioning_violation() -> None:
    desc = TopologyDescription.from_dict(
        {
            "nodes": [
                {"name": "in", "type": "source", "topics": ["a", "b"]},
                {"name": "out", "type": "sink", "input": "in", "topic": "c"},
            ]
        }
    )

    text = describe(desc, "app", {"a": 1, "b": 2})

    assert "Tasks:\n  invalid: sub-topology 0: source topics are not co-partitioned" in text
