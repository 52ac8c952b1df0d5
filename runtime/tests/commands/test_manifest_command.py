"""``streamapp manifest`` writes the StreamApp (or StreamReplay) of an application from its code: the example's
manifest is exactly what the command prints for it, config keys land in the spec fields the operator wants them
in, and what the pods would refuse (a typo, credentials in plain text, a lambda) fails here instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from streamapp import StreamsBuilder, TopologyDescription
from streamapp.cli import main

REPO = Path(__file__).resolve().parents[3]
FLIGHTS_MANIFEST = REPO / "examples" / "flights" / "streamapp.yaml"
FLIGHTS = ["--topology", "flights_app.topology:build", "--name", "flights-per-carrier"]


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _without_comments(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.lstrip().startswith("#")]


def test_the_flights_example_manifest_is_what_the_command_prints_for_it() -> None:
    result = _invoke(
        "manifest",
        *FLIGHTS,
        "--image",
        "localhost/streamapp:dev",
        "--image-pull-policy",
        "Never",
        "--replicas",
        "2",
        "--threads",
        "2",
        "--bootstrap-servers",
        "127.0.0.1:9092",
        "--state-size",
        "1Gi",
        "--set",
        "commit.interval.ms=1000",
    )

    assert result.exit_code == 0, result.output
    assert _without_comments(result.output) == _without_comments(FLIGHTS_MANIFEST.read_text())


def test_config_keys_become_spec_fields_and_the_rest_spec_config_as_strings(tmp_path: Path) -> None:
    config = tmp_path / "streams.yaml"
    config.write_text(
        "application.id: flights-v1\nbootstrap.servers: kafka:9092\nnum.stream.threads: 3\n"
        "processing.guarantee: exactly_once_v2\nstate.dir: .state\nhttp.port: 8081\n"
        "application.server: localhost:8081\n"
        "commit.interval.ms: 500\nconsumer.fetch.max.bytes: 1048576\n"
    )

    result = _invoke("manifest", *FLIGHTS, "--image", "me/flights:1", "--config", str(config), "--threads", "4")

    assert result.exit_code == 0, result.output
    document = yaml.safe_load(result.output)
    spec = document["spec"]
    assert (document["apiVersion"], document["kind"]) == ("streamapp.io/v1alpha1", "StreamApp")
    assert (spec["applicationId"], spec["threads"]) == ("flights-v1", 4)
    assert spec["kafka"] == {"bootstrapServers": "kafka:9092"}
    assert (spec["replicas"], spec["processingGuarantee"]) == (1, "exactly_once_v2")
    # no state.dir, http.port nor application.server: the operator sets them
    assert spec["config"] == {"commit.interval.ms": "500", "consumer.fetch.max.bytes": "1048576"}
    assert TopologyDescription.from_dict(spec["topology"]).node("departed").functions() == {
        "predicate": "flights_app.logic:is_departed"
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "comit.interval.ms=5"], "unknown key 'comit.interval.ms'"),
        (["--set", "consumer.fetch.max.bytez=5"], "config key 'consumer.fetch.max.bytez': No such configuration"),
        (["--set", "sasl.password=hunter2"], "config keys sasl.password: a StreamApp takes connection security"),
    ],
    ids=["streams-typo", "librdkafka-typo", "credentials"],
)
def test_what_every_pod_would_refuse_fails_the_command(args: list[str], message: str) -> None:
    result = _invoke("manifest", *FLIGHTS, "--image", "i", "--bootstrap-servers", "k:9092", *args)

    assert result.exit_code == 1
    assert message in result.output
    assert "hunter2" not in result.output


def build_with_lambdas() -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream("a", name="in").filter(lambda k, v: True, name="all").map_values(lambda v: v, name="same").to("b")
    return builder


def test_a_topology_with_lambdas_names_every_one() -> None:
    result = _invoke("manifest", "--topology", f"{__name__}:build_with_lambdas", "--name", "x", "--image", "i")

    assert result.exit_code == 1
    assert "2 functions cannot be exported" in result.output
    assert "node 'all'" in result.output and "node 'same'" in result.output


def _replay(mode: str, *args: str) -> dict[str, Any]:
    """The StreamReplay ``flights-v2`` of the flights app the command prints (it must succeed)."""
    result = _invoke("manifest", *FLIGHTS, "--replay", "flights-v2", "--mode", mode, *args)
    assert result.exit_code == 0, result.output
    return dict(yaml.safe_load(result.output))


def test_replay_prints_a_stream_replay_of_the_app_through_this_topology() -> None:
    document = _replay(
        "backfill", "--image", "me/flights:2", "--spark-image", "me/spark:1", "--application-id", "flights-v2"
    )

    assert (document["kind"], document["metadata"]) == ("StreamReplay", {"name": "flights-v2"})
    spec = document["spec"]
    assert (spec["appRef"], spec["image"], spec["mode"], spec["applicationId"]) == (
        {"name": "flights-per-carrier"},
        "me/flights:2",
        "backfill",
        "flights-v2",
    )
    assert spec["spark"] == {"image": "me/spark:1"}
    assert "handover" not in spec  # the operator's defaults: the replay's image, the app's replicas, New outputs
    assert spec["topology"] == yaml.safe_load(FLIGHTS_MANIFEST.read_text())["spec"]["topology"]


def test_a_handover_names_the_new_versions_image_replicas_and_outputs() -> None:
    spec = _replay("handover", "--handover-image", "me/flights:2", "--handover-replicas", "3", "--outputs", "TakeOver")[
        "spec"
    ]

    assert spec["handover"] == {"image": "me/flights:2", "replicas": 3, "outputs": "TakeOver"}
    assert "image" not in spec and "spark" not in spec  # the replay runs handover.image's code on the operator's image


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "handover", "--image", "me/a:1", "--handover-image", "me/a:2"], "replay image me/a:1 and handover"),
        (["--mode", "backfill", "--outputs", "TakeOver"], "handover outputs: settings of a handover's new version"),
        (["--mode", "backfill", "--handover-image", "me/a:2"], "handover image: settings of a handover's new version"),
    ],
    ids=["two-images", "backfill-outputs", "backfill-image"],
)
def test_a_replay_the_crd_would_refuse_fails_the_command(args: list[str], message: str) -> None:
    result = _invoke("manifest", *FLIGHTS, "--replay", "r", *args)

    assert result.exit_code == 1
    assert message in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replay", "r"], "--replay needs --mode"),
        (["--mode", "backfill"], "give --replay NAME too"),
        (["--image", "i", "--outputs", "TakeOver", "--handover-replicas", "2"], "--handover-replicas, --outputs: opt"),
        (["--replay", "r", "--mode", "handover", "--replicas", "2", "--threads", "2"], "--replicas, --threads: opt"),
        (["--replay", "r", "--mode", "handover", "--outputs", "Old"], "'Old' is not one of 'New', 'TakeOver'"),
        (["--bootstrap-servers", "k:9092"], "needs --image"),
        (["--image", "i"], "give --bootstrap-servers"),
    ],
)
def test_incomplete_or_misplaced_options_say_what_is_wrong(args: list[str], message: str) -> None:
    result = _invoke("manifest", *FLIGHTS, *args)

    assert result.exit_code == 2
    assert message in result.output
