"""The librdkafka settings of a stream thread's clients (pure: no client is created)."""

from __future__ import annotations

from streamapp.config import StreamsConfig
from streamapp.kafka.clients import consumer_config, producer_config, restore_consumer_config

BASE = {"application.id": "flights", "bootstrap.servers": "127.0.0.1:9092"}


def test_every_producer_partitions_with_murmur2_even_when_overridden() -> None:
    config = StreamsConfig.from_mapping({**BASE, "producer.partitioner": "consistent_random"})
    assert producer_config(config, 0, None)["partitioner"] == "murmur2_random"


def test_consumer_group_is_the_application_id_and_never_auto_commits() -> None:
    settings = consumer_config(StreamsConfig.from_mapping(BASE), 1, None)
    assert settings["group.id"] == "flights"
    assert settings["enable.auto.commit"] is False
    assert settings["auto.offset.reset"] == "earliest"
    assert "group.instance.id" not in settings


def test_static_membership_uses_instance_id_and_thread_index() -> None:
    settings = consumer_config(StreamsConfig.from_mapping(BASE), 1, "flights-0")
    assert settings["group.instance.id"] == "flights-0-1"


def test_default_protocol_is_kip_848_with_the_brokers_range_assignor() -> None:
    settings = consumer_config(StreamsConfig.from_mapping(BASE), 0, None)
    assert settings["group.protocol"] == "consumer"
    assert settings["group.remote.assignor"] == "range"
    assert "partition.assignment.strategy" not in settings


def test_classic_protocol_uses_the_eager_range_assignor() -> None:
    settings = consumer_config(StreamsConfig.from_mapping({**BASE, "group.protocol": "classic"}), 0, None)
    assert settings["group.protocol"] == "classic"
    assert settings["partition.assignment.strategy"] == "range"
    assert "group.remote.assignor" not in settings


def test_restore_consumer_has_no_group_membership_and_reports_the_end() -> None:
    config = StreamsConfig.from_mapping({**BASE, "consumer.group.protocol": "classic", "consumer.fetch.min.bytes": 1})
    settings = restore_consumer_config(config, 0, "pod-0")
    assert "group.instance.id" not in settings and "group.protocol" not in settings
    assert settings["enable.partition.eof"] is True
    assert settings["fetch.min.bytes"] == "1"
