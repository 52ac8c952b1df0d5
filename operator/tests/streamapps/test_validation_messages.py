"""Invalid StreamApps become problems whose messages say what is wrong and where."""

from __future__ import annotations

import copy

from operator_fakes import FLIGHTS_TOPOLOGY, flights_spec
from streamapp_operator.streamapps.resources import StreamAppSpec
from streamapp_operator.streamapps.validate import (
    INTERNAL_TOPIC_MISMATCH,
    SOURCE_TOPIC_MISSING,
    SPEC_INVALID,
    TOPOLOGY_INVALID,
    parse_spec,
    parse_topology,
    plan_topics,
)


def _topology(**node_overrides: dict[str, object]) -> dict[str, object]:
    topology = copy.deepcopy(FLIGHTS_TOPOLOGY)
    for node in topology["nodes"]:
        node.update(node_overrides.get(node["name"], {}))
    return topology


def test_valid_spec_has_no_problems_and_application_id_defaults_to_the_name() -> None:
    spec, problems = parse_spec(flights_spec())
    assert problems == []
    assert spec is not None
    assert spec.effective_application_id("flights-per-carrier") == "flights-per-carrier"
    spec, _ = parse_spec(flights_spec(applicationId="flights-v2"))
    assert spec is not None and spec.effective_application_id("flights-per-carrier") == "flights-v2"


def test_spec_defaults_match_kafka_streams() -> None:
    spec = StreamAppSpec.parse(
        {"image": "i", "kafka": {"bootstrapServers": "k:9092"}, "topology": {"nodes": FLIGHTS_TOPOLOGY["nodes"]}}
    )
    assert (spec.replicas, spec.threads, spec.processing_guarantee.value) == (1, 1, "at_least_once")
    assert spec.state.size == "1Gi" and spec.config == {}


def test_spec_missing_a_required_field_names_the_field() -> None:
    raw = flights_spec()
    del raw["kafka"]
    spec, problems = parse_spec(raw)
    assert spec is None
    assert [p.reason for p in problems] == [SPEC_INVALID]
    assert "spec: kafka: Field required" in problems[0].message


def test_config_must_not_override_fields_the_operator_derives() -> None:
    _, problems = parse_spec(flights_spec(config={"num.stream.threads": "4", "application.id": "x"}))
    messages = [p.message for p in problems]
    assert messages == [
        "spec.config['application.id'] is set by the operator from spec.applicationId",
        "spec.config['num.stream.threads'] is set by the operator from spec.threads",
    ]


def test_config_must_not_set_the_query_endpoint_each_pod_advertises_itself() -> None:
    _, problems = parse_spec(flights_spec(config={"application.server": "10.0.0.1:8080"}))
    assert [p.message for p in problems] == [
        "spec.config['application.server'] is set by the operator from each pod's IP and http port "
        "(STREAMAPP_APPLICATION_SERVER)"
    ]


def test_replication_factor_must_be_a_kafka_replication_factor() -> None:
    _, problems = parse_spec(flights_spec(config={"replication.factor": "zero"}))
    assert problems[0].message == "spec.config['replication.factor'] must be -1 or a positive integer, got 'zero'"
    assert parse_spec(flights_spec(config={"replication.factor": "3"}))[1] == []


def test_unknown_node_type_names_the_node_and_the_allowed_types() -> None:
    spec = StreamAppSpec.parse(flights_spec(topology=_topology(departed={"type": "flatten"})))
    topology, problems = parse_topology(spec)
    assert topology is None
    (problem,) = problems
    assert problem.reason == TOPOLOGY_INVALID and problem.topology
    assert problem.message.startswith("spec.topology: ")
    assert "departed" in problem.message and "flatten" in problem.message and "filter" in problem.message


def test_a_function_no_pod_could_import_names_the_node_and_parameter() -> None:
    """A lambda's reference parses as a description (the runtime runs it in-process) but no pod can import it."""
    spec = StreamAppSpec.parse(flights_spec(topology=_topology(departed={"predicate": "flights_app.logic:<lambda>"})))
    topology, problems = parse_topology(spec)
    assert topology is None
    (problem,) = problems
    assert problem.reason == TOPOLOGY_INVALID
    assert "node 'departed': predicate" in problem.message and "lambda" in problem.message


def test_dangling_input_names_the_node_and_the_missing_input() -> None:
    spec = StreamAppSpec.parse(flights_spec(topology=_topology(count={"input": "nowhere"})))
    _, problems = parse_topology(spec)
    assert "'count'" in problems[0].message and "'nowhere'" in problems[0].message


def test_missing_source_topic_is_a_topology_problem_naming_the_topic() -> None:
    topology, _ = parse_topology(StreamAppSpec.parse(flights_spec()))
    assert topology is not None
    plan, problems = plan_topics(topology, "app", {"departures-per-carrier": 4})
    assert plan is None
    assert [(p.reason, p.message, p.topology) for p in problems] == [
        (SOURCE_TOPIC_MISSING, "source topic 'flights' does not exist in Kafka", True)
    ]


def test_plan_sizes_internal_topics_from_the_source_partitions() -> None:
    topology, _ = parse_topology(StreamAppSpec.parse(flights_spec()))
    assert topology is not None
    plan, problems = plan_topics(topology, "app", {"flights": 6})
    assert problems == [] and plan is not None
    assert [(t.name, t.partitions, t.config) for t in plan.internal_topics] == [
        ("app-per-carrier-repartition", 6, {"cleanup.policy": "delete", "retention.ms": "-1"}),
        ("app-departures-per-carrier-store-changelog", 6, {"cleanup.policy": "compact"}),
    ]
    assert plan.tasks == 12  # two sub-topologies of six tasks each


def test_existing_internal_topic_with_other_partition_count_is_reported() -> None:
    topology, _ = parse_topology(StreamAppSpec.parse(flights_spec()))
    assert topology is not None
    _, problems = plan_topics(topology, "app", {"flights": 6, "app-departures-per-carrier-store-changelog": 2})
    assert [(p.reason, p.topology) for p in problems] == [(INTERNAL_TOPIC_MISMATCH, False)]
    assert problems[0].message == (
        "internal topic 'app-departures-per-carrier-store-changelog' has 2 partitions but the topology needs 6; "
        "delete the topic or use a new applicationId"
    )


def test_a_topology_with_to_table_and_process_values_nodes_is_valid_and_plans_their_topics() -> None:
    """The CRD passes any node ``type`` through; the runtime's description decides, so the node types of
    ``KStream.to_table`` (KIP-523) and ``KStream.process_values`` (KIP-820) are accepted as the runtime runs them."""
    topology = copy.deepcopy(FLIGHTS_TOPOLOGY)
    topology["nodes"] = [
        topology["nodes"][0],
        {"name": "tagged", "type": "process_values", "input": "flights", "processor": "flights_app.logic:Tag"},
        {"name": "latest", "type": "to_table", "input": "tagged", "store": "latest-store"},
        {"name": "changes", "type": "to_stream", "input": "latest"},
        {"name": "out", "type": "sink", "input": "changes", "topic": "latest-flights", "keySerde": "string"},
    ]
    topology["stores"] = [{"name": "latest-store", "type": "key_value", "keySerde": "string", "valueSerde": "json"}]

    parsed, problems = parse_topology(StreamAppSpec.parse(flights_spec(topology=topology)))

    assert problems == [] and parsed is not None
    plan, problems = plan_topics(parsed, "app", {"flights": 3})
    assert problems == [] and plan is not None
    assert [(t.name, t.partitions) for t in plan.internal_topics] == [("app-latest-store-changelog", 3)]
    assert plan.tasks == 3  # process_values keeps keys: one sub-topology, no repartition
