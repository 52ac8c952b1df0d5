"""The streamapp CLI: export prints the description, describe explains it, run wires file + config."""

from __future__ import annotations

import json
import socket
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from streamapp import TopologyDescription
from streamapp.cli import main

REPO = Path(__file__).resolve().parents[2]
FLIGHTS_MANIFEST = REPO / "examples" / "flights" / "streamapp.yaml"


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_export_of_the_flights_example_equals_the_topology_in_its_manifest() -> None:
    result = _invoke("topology", "export", "flights_app.topology:build")

    assert result.exit_code == 0, result.output
    manifest = yaml.safe_load(FLIGHTS_MANIFEST.read_text())
    assert yaml.safe_load(result.output) == manifest["spec"]["topology"]


def test_export_as_json_prints_the_same_document() -> None:
    as_yaml = _invoke("topology", "export", "flights_app.topology:build").output
    as_json = _invoke("topology", "export", "flights_app.topology:build", "--format", "json").output

    assert json.loads(as_json) == yaml.safe_load(as_yaml)


def build_description() -> TopologyDescription:
    return TopologyDescription.from_dict(
        {
            "nodes": [
                {"name": "in", "type": "source", "topics": ["a"]},
                {"name": "out", "type": "sink", "input": "in", "topic": "b"},
            ]
        }
    )


def build_nothing() -> int:
    return 42


def build_with_a_lambda() -> Any:
    from streamapp import StreamsBuilder

    builder = StreamsBuilder()
    builder.stream("a", name="in").map_values(lambda value: value, name="same").to("b", name="out")
    return builder


def test_export_accepts_a_function_returning_a_description() -> None:
    result = _invoke("topology", "export", f"{__name__}:build_description")

    assert result.exit_code == 0, result.output
    assert TopologyDescription.from_yaml(result.output) == build_description()


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("flights_app.topology:missing", "module 'flights_app.topology' has no attribute 'missing'"),
        ("no_such_pkg_q:build", "cannot import module 'no_such_pkg_q'"),
        (f"{__name__}:build_nothing", "returned int; expected a StreamsBuilder or a TopologyDescription"),
        ("flights_app.logic:carrier", "cannot be called without arguments"),
        (f"{__name__}:build_with_a_lambda", f"node 'same': mapper: a lambda in {__name__} cannot be exported"),
    ],
    ids=["missing_attribute", "missing_module", "wrong_return_type", "needs_arguments", "lambda"],
)
def test_export_failure_is_one_error_line_with_exit_code_1(ref: str, message: str) -> None:
    result = _invoke("topology", "export", ref)

    assert result.exit_code == 1
    assert result.output.startswith("Error: ")
    assert message in result.output


def test_describe_lists_internal_topics_and_task_ids_for_given_partitions(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(_invoke("topology", "export", "flights_app.topology:build").output)

    result = _invoke("topology", "describe", str(topology), "--application-id", "fpc", "--partitions", "flights=3")

    assert result.exit_code == 0, result.output
    assert "   Sub-topology: 1\n    Source: per-carrier (topics: [fpc-per-carrier-repartition])" in result.output
    assert "  fpc-departures-per-carrier-store-changelog (partitions: 3, cleanup.policy=compact)" in result.output
    assert "  sub-topology 1: 1_0, 1_1, 1_2\n" in result.output


def test_describe_reads_a_streamapp_manifest_and_its_application_name() -> None:
    result = _invoke("topology", "describe", str(FLIGHTS_MANIFEST), "--partitions", "flights=2")

    assert result.exit_code == 0, result.output
    assert (
        "flights-per-carrier-per-carrier-repartition (partitions: 2, cleanup.policy=delete, retention.ms=-1)"
        in result.output
    )


def test_describe_of_an_invalid_topology_names_the_file_and_the_problem(tmp_path: Path) -> None:
    topology = tmp_path / "bad.yaml"
    topology.write_text("nodes:\n  - {name: in, type: sauce, topics: [a]}\n")

    result = _invoke("topology", "describe", str(topology))

    assert result.exit_code == 1
    assert f"Error: {topology}: node 'in': unknown type 'sauce'" in result.output


@pytest.mark.parametrize("spec", ["flights", "flights=many", "flights=0", "=3"])
def test_describe_rejects_malformed_partition_counts(spec: str, tmp_path: Path) -> None:
    result = _invoke("topology", "describe", str(FLIGHTS_MANIFEST), "--partitions", spec)

    assert result.exit_code == 2
    assert "--partitions" in result.output


class _FakeKafkaStreams:
    """Stands in for streamapp.app.KafkaStreams: records what the CLI passes and returns an exit code."""

    created: list[tuple[Any, Any]] = []

    def __init__(self, topology: Any, config: Any) -> None:
        self.created.append((topology, config))

    def run(self) -> int:
        return 3


@pytest.fixture
def fake_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """``streamapp run`` with ``_FakeKafkaStreams`` instead of the processing runtime (the config is real)."""
    monkeypatch.setitem(sys.modules, "streamapp.app", types.SimpleNamespace(KafkaStreams=_FakeKafkaStreams))
    _FakeKafkaStreams.created.clear()


@pytest.mark.usefixtures("fake_runtime")
def test_run_loads_topology_and_config_and_exits_with_the_runtimes_code(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(build_description().to_yaml())
    config = tmp_path / "streams.yaml"
    config.write_text("application.id: x\nbootstrap.servers: 127.0.0.1:9092\n")

    result = _invoke(
        "run",
        "--topology",
        str(topology),
        "--config",
        str(config),
        "--set",
        "num.stream.threads=2",
        "--set",
        "consumer.client.rack=b=c",
    )

    assert result.exit_code == 3, result.output
    [(description, streams_config)] = _FakeKafkaStreams.created
    assert description == build_description()
    assert (streams_config.application_id, streams_config.num_stream_threads) == ("x", 2)
    assert streams_config.consumer["client.rack"] == "b=c"


@pytest.mark.usefixtures("fake_runtime")
def test_run_gives_serdes_the_topology_leaves_out_the_configs_defaults(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(
        "nodes:\n- {name: in, type: source, topics: [a], keySerde: string}\n"
        "- {name: out, type: sink, input: in, topic: b}\n"
    )
    config = tmp_path / "streams.yaml"
    config.write_text("application.id: x\nbootstrap.servers: 127.0.0.1:9\ndefault.value.serde: json\n")

    assert _invoke("run", "--topology", str(topology), "--config", str(config)).exit_code == 3
    description = _FakeKafkaStreams.created[0][0]
    assert [(node.key_serde, node.value_serde) for node in description.nodes] == [
        ("string", "json"),
        ("bytes", "json"),
    ]


def test_run_with_an_invalid_topology_fails_before_starting_the_runtime(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text("nodes: []\n")
    config = tmp_path / "streams.yaml"
    config.write_text("application.id: x\n")

    result = _invoke("run", "--topology", str(topology), "--config", str(config))

    assert result.exit_code == 1
    assert "topology has no nodes" in result.output


def test_run_rejects_a_malformed_override(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(build_description().to_yaml())

    result = _invoke("run", "--topology", str(topology), "--config", str(topology), "--set", "novalue")

    assert result.exit_code == 2
    assert "'novalue' is not KEY=VALUE" in result.output


def test_run_with_an_invalid_config_fails_with_a_message_not_a_traceback(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(build_description().to_yaml())
    config = tmp_path / "streams.yaml"
    config.write_text("bootstrap.servers: localhost:9092\n")

    result = _invoke("run", "--topology", str(topology), "--config", str(config))

    assert result.exit_code == 1
    assert f"Error: {config}:" in result.output
    assert "application.id" in result.output
    assert isinstance(result.exception, SystemExit)


def build_flights_like() -> Any:
    from streamapp import StreamsBuilder

    builder = StreamsBuilder()
    builder.stream("a", name="in").to("b", name="out")
    return builder


@pytest.mark.usefixtures("fake_runtime")
def test_run_takes_a_topology_function_and_builds_it_with_the_configs_default_serdes(tmp_path: Path) -> None:
    config = tmp_path / "streams.yaml"
    config.write_text("application.id: x\nbootstrap.servers: 127.0.0.1:9\ndefault.value.serde: json\n")

    assert _invoke("run", "--topology", f"{__name__}:build_flights_like", "--config", str(config)).exit_code == 3
    description = _FakeKafkaStreams.created[0][0]
    assert [(node.key_serde, node.value_serde) for node in description.nodes] == [("bytes", "json")] * 2


@pytest.mark.usefixtures("fake_runtime")
def test_run_imports_user_modules_from_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "local_app_q.py").write_text(
        "from streamapp import StreamsBuilder\n\n"
        "def is_big(key, value):\n    return len(value) > 3\n\n"
        "def build():\n    builder = StreamsBuilder()\n"
        "    builder.stream('a', name='in').filter(is_big, name='big').to('b', name='out')\n    return builder\n"
    )
    (tmp_path / "topology.yaml").write_text(
        "nodes:\n- {name: in, type: source, topics: [a]}\n"
        "- {name: big, type: filter, input: in, predicate: 'local_app_q:is_big'}\n"
        "- {name: out, type: sink, input: big, topic: b}\n"
    )
    (tmp_path / "streams.yaml").write_text("application.id: x\nbootstrap.servers: 127.0.0.1:9\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))

    for topology in ("local_app_q:build", "topology.yaml"):
        assert _invoke("run", "--topology", topology, "--config", "streams.yaml").exit_code == 3
    for description, _ in _FakeKafkaStreams.created:
        assert description.resolve_functions()["big"]["predicate"](None, b"long") is True


def test_run_refuses_a_topology_that_is_neither_a_file_nor_a_function(tmp_path: Path) -> None:
    result = _invoke("run", "--topology", str(tmp_path / "missing.yaml"), "--config", __file__)

    assert result.exit_code == 2
    assert "is neither a file nor 'module:function'" in result.output


def test_a_second_local_app_serves_http_on_a_free_port_unless_http_port_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``streamapp run`` with the real config and a fake ``KafkaStreams``, while a first app serves the port a
    config that leaves ``http.port`` at its default would take (moved off 8080 so the test takes no shared port)."""
    from streamapp.config import StreamsConfig

    monkeypatch.setitem(sys.modules, "streamapp.app", types.SimpleNamespace(KafkaStreams=_FakeKafkaStreams))
    monkeypatch.setattr(_FakeKafkaStreams, "created", [])
    monkeypatch.setenv("STREAMAPP_HTTP_HOST", "127.0.0.1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    load = StreamsConfig.load
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(build_description().to_dict()))
    with socket.socket() as first_app:
        first_app.bind(("127.0.0.1", 0))
        first_app.listen()
        taken = first_app.getsockname()[1]

        def load_with_the_default_port_taken(path: Path, overrides: dict[str, str]) -> StreamsConfig:
            config = load(path, overrides)
            if "http_port" in config.model_fields_set:
                return config
            moved = config.model_copy(update={"http_port": taken})
            moved.__pydantic_fields_set__.discard("http_port")  # still the default, now `taken`
            return moved

        monkeypatch.setattr(StreamsConfig, "load", staticmethod(load_with_the_default_port_taken))
        base = "application.id: second\nbootstrap.servers: 127.0.0.1:9\n"
        (tmp_path / "default.yaml").write_text(base)
        (tmp_path / "explicit.yaml").write_text(f"{base}http.port: {taken}\n")

        at_default = _invoke("run", "--topology", "topology.yaml", "--config", "default.yaml")
        explicit = _invoke("run", "--topology", "topology.yaml", "--config", "explicit.yaml")

    assert (at_default.exit_code, explicit.exit_code) == (3, 3)
    assert [config.http_port for _, config in _FakeKafkaStreams.created] == [0, taken]  # 0: the server picks one
    assert f"port {taken} (the default http.port) is in use" in at_default.stderr
    assert "in use" not in explicit.stderr


def build_with_two_lambdas() -> Any:
    from streamapp import StreamsBuilder

    builder = StreamsBuilder()
    stream = builder.stream("a", name="in").filter(lambda key, value: True, name="all")
    stream.map_values(lambda value: value, name="same").to("b", name="out")
    return builder


def test_export_names_every_lambda_in_one_error() -> None:
    result = _invoke("topology", "export", f"{__name__}:build_with_two_lambdas")

    assert result.exit_code == 1
    assert result.output.startswith("Error: 2 functions cannot be exported:\n")
    assert f"  - node 'all': predicate: a lambda in {__name__} cannot be exported" in result.output
    assert f"  - node 'same': mapper: a lambda in {__name__} cannot be exported" in result.output


@pytest.mark.usefixtures("fake_runtime")
def test_run_lists_every_broken_reference_and_librdkafka_typo_before_starting(tmp_path: Path) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(
        "nodes:\n- {name: in, type: source, topics: [a]}\n"
        "- {name: big, type: filter, input: in, predicate: 'no_such_module_q:is_big'}\n"
        f"- {{name: small, type: map_values, input: big, mapper: '{__name__}:no_such_function'}}\n"
        "- {name: out, type: sink, input: small, topic: b}\n"
    )
    config = tmp_path / "streams.yaml"
    config.write_text("application.id: x\nbootstrap.servers: 127.0.0.1:9\nconsumer.fetch.max.bytez: 1\n")

    result = _invoke("run", "--topology", str(topology), "--config", str(config))

    assert result.exit_code == 1
    assert _FakeKafkaStreams.created == []
    lines = result.output.splitlines()
    assert lines[0] == "Error: cannot run: 3 problems:"
    assert lines[1].startswith("  - node 'big': predicate: function reference 'no_such_module_q:is_big': cannot")
    assert lines[2].startswith(f"  - node 'small': mapper: function reference '{__name__}:no_such_function'")
    assert lines[3] == (
        "  - config key 'consumer.fetch.max.bytez': No such configuration property: \"fetch.max.bytez\""
    )


@pytest.mark.usefixtures("fake_runtime")
def test_run_of_a_function_with_lambdas_and_a_bad_config_lists_both(tmp_path: Path) -> None:
    config = tmp_path / "streams.yaml"
    config.write_text("application.id: x\n")

    result = _invoke("run", "--topology", f"{__name__}:build_with_two_lambdas", "--config", str(config))

    assert result.exit_code == 1
    assert _FakeKafkaStreams.created == []
    assert "Error: cannot run: 3 problems:\n  - node 'all': predicate: a lambda" in result.output
    assert f"  - {config}: invalid streams config: 'bootstrap.servers' is required" in result.output


def build_with_a_lambda_and_a_misspelt_reference() -> Any:
    from streamapp import StreamsBuilder

    builder = StreamsBuilder()
    stream = builder.stream("a", name="in").filter(lambda key, value: True, name="all")
    stream.map_values(f"{__name__}:no_such_mapper", name="same").to("b", name="out")
    return builder


@pytest.mark.usefixtures("fake_runtime")
def test_run_of_a_function_lists_its_lambdas_and_its_misspelt_references_together(tmp_path: Path) -> None:
    config = tmp_path / "streams.yaml"
    config.write_text("application.id: x\nbootstrap.servers: 127.0.0.1:9\n")

    result = _invoke(
        "run", "--topology", f"{__name__}:build_with_a_lambda_and_a_misspelt_reference", "--config", str(config)
    )

    assert result.exit_code == 1
    assert _FakeKafkaStreams.created == []
    lines = result.output.splitlines()
    assert lines[0] == "Error: cannot run: 2 problems:"
    assert lines[1].startswith(f"  - node 'all': predicate: a lambda in {__name__} cannot be exported")
    assert lines[2] == (
        f"  - node 'same': mapper: function reference '{__name__}:no_such_mapper': "
        f"module '{__name__}' has no attribute 'no_such_mapper'"
    )
