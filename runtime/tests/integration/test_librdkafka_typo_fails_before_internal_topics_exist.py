"""A librdkafka typo in the streams config (``consumer.fetch.max.bytez``) stops ``KafkaStreams.run`` before it
touches the cluster: it returns 1 naming the key, and none of the application's internal topics exist, where it
used to create them and then crash-loop its stream threads with backoff. The same app with the key spelled right
creates them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from streamapp.app import KafkaStreams
from streamapp.config import StreamsConfig
from streamapp.kafka.admin import TopicAdmin
from streamapp.topology import TopologyDescription
from streamapp_harness import KafkaTestClient, count_by_color_topology, unique, wait_for

pytestmark = pytest.mark.integration


def test_a_librdkafka_typo_fails_the_instance_before_any_internal_topic_is_created(
    kafka: KafkaTestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # integration_functions, for the workers
    source, output, app_id = unique("typo-in"), unique("typo-out"), unique("typo-app")
    kafka.create_topics({source: 1, output: 1})
    topology = TopologyDescription.from_dict(count_by_color_topology([source], output))
    internal = [f"{app_id}-by-color-repartition", f"{app_id}-counts-changelog"]
    admin = TopicAdmin({"bootstrap.servers": kafka.bootstrap})

    def config(fetch_key: str) -> StreamsConfig:
        return StreamsConfig.from_mapping(
            {
                "application.id": app_id,
                "bootstrap.servers": kafka.bootstrap,
                "http.port": 0,
                f"consumer.{fetch_key}": "1048576",
            }
        )

    typo = KafkaStreams(topology, config("fetch.max.bytez"), http_host="127.0.0.1", failed_exit_delay_s=0.0)
    assert typo.run() == 1
    failure = typo.status()["last_failure"]
    assert failure is not None
    assert "config key 'consumer.fetch.max.bytez': No such configuration property" in failure["error"]
    assert admin.partition_counts(internal) == {}

    fixed = KafkaStreams(topology, config("fetch.max.bytes"), http_host="127.0.0.1")
    runner = threading.Thread(target=fixed.run)
    runner.start()
    try:
        wait_for(lambda: set(admin.partition_counts(internal)) == set(internal), 60, "the internal topics")
    finally:
        fixed.close()
        runner.join(90)
    assert not runner.is_alive()
