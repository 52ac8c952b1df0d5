"""``streamapp topics create`` makes exactly the topology's missing external topics, with the partitions and
retention asked for, and a second run changes nothing; ``streamapp topics tail`` prints a topic's records decoded
with the serdes the topology declares for it (a windowed key included), one line per record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, ConfigResource
from streamapp.cli import main
from streamapp.serdes import serde_for
from streamapp.windowed import Windowed
from streamapp_harness import WINDOW_MS, KafkaTestClient, unique, windowed_count_by_color_topology

pytestmark = pytest.mark.integration

T0_MS = 1_700_000_000_000


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _retention_ms(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return str(future.result()["retention.ms"].value)


def test_create_makes_the_missing_external_topics_once(kafka: KafkaTestClient, tmp_path: Path) -> None:
    first, second, output = unique("tc-a"), unique("tc-b"), unique("tc-out")
    kafka.create_topics({first: 2})
    topology = tmp_path / "topology.yaml"
    topology.write_text(yaml.safe_dump(windowed_count_by_color_topology([first, second], output)))
    args = ["topics", "create", "--topology", str(topology), "--bootstrap-server", kafka.bootstrap]

    created = _invoke(*args, "--partitions", "2", "--retention-ms", "-1")
    again = _invoke(*args)

    assert created.exit_code == 0, created.output
    assert created.output.splitlines() == [
        f"Created topic {second} (2 partitions, retention.ms=-1)",
        f"Created topic {output} (2 partitions, retention.ms=-1)",
        f"Exists: {first} (2 partitions)",
    ]
    assert kafka.end_offsets(second).keys() == kafka.end_offsets(output).keys() == {0, 1}
    assert _retention_ms(kafka.bootstrap, output) == "-1"
    assert _retention_ms(kafka.bootstrap, first) != "-1"  # an existing topic is left as it is
    assert again.exit_code == 0, again.output
    assert again.output.splitlines() == [f"Exists: {t} (2 partitions)" for t in (first, second, output)]


def test_tail_decodes_records_with_the_serdes_of_the_topology(kafka: KafkaTestClient, tmp_path: Path) -> None:
    source, output = unique("tt-in"), unique("tt-out")
    kafka.create_topics({source: 1, output: 1})
    topology = tmp_path / "topology.yaml"
    topology.write_text(yaml.safe_dump(windowed_count_by_color_topology([source], output)))
    kafka.produce(source, [("k1", {"n": 1, "color": "red", "ts": T0_MS})])
    key_serde, value_serde = serde_for(f"windowed:string:{WINDOW_MS}"), serde_for("long")
    for count in (1, 2):
        kafka.producer.produce(
            output,
            key=key_serde.serialize(Windowed("red", T0_MS, T0_MS + WINDOW_MS)),
            value=value_serde.serialize(count),
            timestamp=T0_MS + count,
        )
    assert kafka.producer.flush(30) == 0
    args = ["--topology", str(topology), "--bootstrap-server", kafka.bootstrap, "--from-beginning"]

    sink = _invoke("topics", "tail", output, *args, "--max-records", "2")
    read = _invoke("topics", "tail", source, *args, "--max-records", "1")

    assert sink.exit_code == 0, sink.output
    assert sink.output.splitlines() == [
        f'key=["red"@{T0_MS}/{T0_MS + WINDOW_MS}] value={count} timestamp={T0_MS + count} '
        f"partition=0 offset={count - 1}"
        for count in (1, 2)
    ]
    assert read.exit_code == 0, read.output
    line = read.output.strip()
    assert line.startswith(f'key="k1" value={json.dumps({"n": 1, "color": "red", "ts": T0_MS})} timestamp=')
    assert line.endswith(" partition=0 offset=0")


def test_tail_of_a_topic_the_topology_does_not_name_lists_the_ones_it_does(
    kafka: KafkaTestClient, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text(yaml.safe_dump(windowed_count_by_color_topology(["in-x"], "out-x")))

    result = _invoke("topics", "tail", "other", "--topology", str(topology), "--bootstrap-server", kafka.bootstrap)

    assert result.exit_code == 1
    assert "Error: topic other is not a source or sink topic of the topology; its topics: in-x, out-x" in result.output
