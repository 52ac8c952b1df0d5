"""StreamsConfig: Kafka Streams keys and defaults, YAML files with overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamapp.config import ConfigError, StreamsConfig

REQUIRED = {"application.id": "flights", "bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_are_kafka_streams_defaults() -> None:
    config = StreamsConfig.from_mapping(REQUIRED)
    assert config.num_stream_threads == 1
    assert config.processing_guarantee == "at_least_once"
    assert config.commit_interval_ms == 30_000
    assert config.state_dir == "/tmp/streamapp"
    assert config.http_port == 8080
    assert config.statestore_cache_max_bytes == 10 * 1024 * 1024
    assert config.replication_factor == -1
    assert config.group_protocol == "consumer"
    assert config.metrics_recording_level == "INFO"


def test_metrics_recording_level_takes_only_kafkas_levels() -> None:
    assert (
        StreamsConfig.from_mapping({**REQUIRED, "metrics.recording.level": "TRACE"}).metrics_recording_level == "TRACE"
    )
    with pytest.raises(ConfigError, match=r"metrics\.recording\.level"):
        StreamsConfig.from_mapping({**REQUIRED, "metrics.recording.level": "VERBOSE"})


def test_file_values_are_overridden_by_set_values(tmp_path: Path) -> None:
    path = tmp_path / "streams.yaml"
    path.write_text(
        "application.id: flights\nbootstrap.servers: 127.0.0.1:9092\nnum.stream.threads: 2\n"
        "commit.interval.ms: 1000\nconsumer.fetch.wait.max.ms: 50\n"
    )
    config = StreamsConfig.load(path, {"commit.interval.ms": "100", "producer.linger.ms": "5"})
    assert config.num_stream_threads == 2
    assert config.commit_interval_ms == 100
    assert config.consumer == {"fetch.wait.max.ms": "50"}
    assert config.producer == {"linger.ms": "5"}


def test_round_trip_through_the_flat_mapping() -> None:
    config = StreamsConfig.from_mapping({**REQUIRED, "consumer.x": True, "num.stream.threads": "3"})
    assert config.consumer == {"x": "true"}
    assert StreamsConfig.from_mapping(config.to_mapping()) == config


def test_application_state_dir_is_state_dir_slash_application_id() -> None:
    config = StreamsConfig.from_mapping({**REQUIRED, "state.dir": "/var/lib/streamapp"})
    assert str(config.application_state_dir) == "/var/lib/streamapp/flights"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"application.id": "a"}, "'bootstrap.servers' is required"),
        ({**REQUIRED, "num.stream.thread": 2}, "unknown key 'num.stream.thread'"),
        (
            {**REQUIRED, "default.deserialization.exception.handler": "dead_letter_queue"},
            "needs errors.dead.letter.queue.topic.name",
        ),
        ({**REQUIRED, "max.task.idle.ms": -2}, "'max.task.idle.ms'"),
        ({**REQUIRED, "processing.guarantee": "at_most_once"}, "'processing.guarantee'"),
        ({**REQUIRED, "num.stream.threads": 0}, "'num.stream.threads'"),
        ({**REQUIRED, "application.id": "has space"}, "'application.id'"),
        ({**REQUIRED, "group.protocol": "streams"}, "'group.protocol'"),
        ({**REQUIRED, "consumer": {"a": 1}}, "use 'consumer.<librdkafka key>' keys"),
        ({**REQUIRED, "consumer.session.timeout.ms": 6000}, "consumer.session.timeout.ms is not supported under"),
        ({**REQUIRED, "consumer.heartbeat.interval.ms": 1000}, "set group.protocol: classic"),
    ],
)
def test_invalid_config_names_the_key(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        StreamsConfig.from_mapping(values)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        StreamsConfig.load(tmp_path / "nope.yaml")


def test_a_file_that_is_not_a_map_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "streams.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a YAML map"):
        StreamsConfig.load(path)


def test_commit_interval_defaults_to_kafka_streams_value_per_guarantee() -> None:
    assert StreamsConfig.from_mapping(REQUIRED).commit_interval_ms == 30_000
    eos = StreamsConfig.from_mapping({**REQUIRED, "processing.guarantee": "exactly_once_v2"})
    assert eos.commit_interval_ms == 100 and eos.exactly_once
    assert StreamsConfig.from_mapping(eos.to_mapping()) == eos
    explicit = {**REQUIRED, "processing.guarantee": "exactly_once_v2", "commit.interval.ms": 500}
    assert StreamsConfig.from_mapping(explicit).commit_interval_ms == 500


def test_classic_group_settings_are_accepted_with_the_classic_protocol() -> None:
    config = StreamsConfig.from_mapping({**REQUIRED, "group.protocol": "classic", "consumer.session.timeout.ms": 6000})
    assert config.consumer["session.timeout.ms"] == "6000"
