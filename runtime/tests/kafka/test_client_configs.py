"""The librdkafka settings of a stream thread's clients (pure: no client is created)."""

from __future__ import annotations

from streamapp.config import StreamsConfig
from streamapp.kafka.clients import (
    CONSUMER_MEMORY_DEFAULTS,
    PRODUCER_MEMORY_DEFAULTS,
    consumer_config,
    producer_config,
    restore_consumer_config,
)

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


def test_group_consumer_bounds_its_prefetch_below_librdkafkas_defaults() -> None:
    """librdkafka's defaults let one fetch queue ~100k small records per partition (the 1M-key build peaked at
    305 MiB RSS); the group consumer must start from the bounded values, and must not lower
    queued.min.messages (the stream thread then waits for fetches: 5x slower) nor bound the queue below 32 MiB
    (16 MiB: the stateless benchmark fell from 101k to 58k records/s)."""
    config = StreamsConfig.from_mapping(BASE)
    settings = consumer_config(config, 0, None)
    assert settings["max.partition.fetch.bytes"] == 262_144  # librdkafka: 1048576
    assert settings["queued.max.messages.kbytes"] == 32_768  # librdkafka: 65536
    assert "queued.min.messages" not in settings and "fetch.max.bytes" not in settings
    assert {k: settings[k] for k in CONSUMER_MEMORY_DEFAULTS} == dict(CONSUMER_MEMORY_DEFAULTS)


def test_restore_consumer_keeps_librdkafkas_fetch_sizes_for_restore_speed() -> None:
    settings = restore_consumer_config(StreamsConfig.from_mapping(BASE), 0, None)
    assert not set(CONSUMER_MEMORY_DEFAULTS) & set(settings)


def test_consumer_keys_override_the_prefetch_bounds() -> None:
    config = StreamsConfig.from_mapping({**BASE, "consumer.queued.min.messages": 100_000})
    assert consumer_config(config, 0, None)["queued.min.messages"] == "100000"
    assert restore_consumer_config(config, 0, None)["queued.min.messages"] == "100000"


def test_producer_send_queue_is_bounded_like_buffer_memory_and_overridable() -> None:
    settings = producer_config(StreamsConfig.from_mapping(BASE), 0, None)
    assert settings["queue.buffering.max.kbytes"] == 32_768  # librdkafka: 1048576 (1 GiB)
    assert settings["queue.buffering.max.messages"] == 100_000
    overridden = StreamsConfig.from_mapping({**BASE, "producer.queue.buffering.max.kbytes": 65536})
    assert producer_config(overridden, 0, None)["queue.buffering.max.kbytes"] == "65536"
    assert PRODUCER_MEMORY_DEFAULTS["queue.buffering.max.kbytes"] == 32_768


def test_the_producer_is_idempotent_under_at_least_once_too_so_a_retry_never_reorders_or_duplicates() -> None:
    """Kafka Streams' producer (Java, ``enable.idempotence=true`` by default since Kafka 3.0, KIP-679); librdkafka's
    default is off. A user may still turn it off with ``producer.enable.idempotence``."""
    for guarantee in ("at_least_once", "exactly_once_v2"):
        config = StreamsConfig.from_mapping({**BASE, "processing.guarantee": guarantee})
        assert producer_config(config, 0, None)["enable.idempotence"] is True
    off = StreamsConfig.from_mapping({**BASE, "producer.enable.idempotence": "false"})
    assert producer_config(off, 0, None)["enable.idempotence"] == "false"
