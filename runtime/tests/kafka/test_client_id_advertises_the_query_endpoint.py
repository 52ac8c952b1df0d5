"""``application.server`` rides in the group consumer's client id (docs/adr/0012-query-endpoints.md): every member
reads it back from the group description with the instance and thread, and a client id without it still parses
(instances of older versions, or without the setting, in one group)."""

from __future__ import annotations

import pytest
from streamapp.config import ConfigError, StreamsConfig
from streamapp.kafka.clients import consumer_config
from streamapp.kafka.types import parse_client_id, parse_member_endpoint

BASE = {"application.id": "app", "bootstrap.servers": "k:9092"}


def test_the_consumer_client_id_ends_with_the_advertised_endpoint() -> None:
    config = StreamsConfig.from_mapping({**BASE, "application.server": "10.1.2.3:8080"})
    client = consumer_config(config, 1, "app-0")["client.id"]
    assert client == "app-app-0-StreamThread-2-consumer@10.1.2.3:8080"
    assert parse_member_endpoint("app", client) == ("app-0", 1, "10.1.2.3:8080")
    assert parse_client_id("app", client) == ("app-0", 1)


def test_without_application_server_the_client_id_keeps_kafka_streams_shape() -> None:
    client = consumer_config(StreamsConfig.from_mapping(BASE), 0, "pod-1")["client.id"]
    assert client == "app-pod-1-StreamThread-1-consumer"
    assert parse_member_endpoint("app", client) == ("pod-1", 0, None)
    assert parse_member_endpoint("app", "rdkafka") is None


def test_the_environment_sets_each_pods_own_application_server() -> None:
    config = StreamsConfig.load(None, dict(BASE), environ={"STREAMAPP_APPLICATION_SERVER": "10.0.0.7:8080"})
    assert config.application_server == "10.0.0.7:8080"
    with pytest.raises(ConfigError, match=r"application\.server"):
        StreamsConfig.from_mapping({**BASE, "application.server": "http://x:80"})
