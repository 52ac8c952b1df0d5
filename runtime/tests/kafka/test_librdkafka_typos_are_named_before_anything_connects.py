"""Every librdkafka setting of a streams config is tried on throwaway clients before the application touches the
cluster: each key librdkafka refuses is named as the user wrote it (``consumer.*``, ``producer.*``, a top-level
security key), all of them at once. The clients get no brokers, so the check never connects."""

from __future__ import annotations

import time

from streamapp.config import StreamsConfig
from streamapp.kafka.config_check import client_config_problems

BASE = {"application.id": "typos", "bootstrap.servers": "127.0.0.1:1"}  # a port nothing listens on


def test_every_refused_key_is_named_once_under_the_name_the_user_wrote() -> None:
    config = StreamsConfig.from_mapping(
        {
            **BASE,
            "consumer.fetch.max.bytez": "1048576",
            "consumer.fetch.max.bytes": "lots",
            "producer.linger.msx": "5",
            "sasl.mechanismz": "PLAIN",
        }
    )

    assert client_config_problems(config) == [
        "config key 'sasl.mechanismz': No such configuration property: \"sasl.mechanismz\"",
        "config key 'consumer.fetch.max.bytez': No such configuration property: \"fetch.max.bytez\"",
        "config key 'consumer.fetch.max.bytes': Invalid value for configuration property \"fetch.max.bytes\"",
        "config key 'producer.linger.msx': No such configuration property: \"linger.msx\"",
    ]


def test_a_valid_config_under_either_guarantee_has_no_problems_and_connects_nowhere() -> None:
    started = time.monotonic()
    for guarantee in ("at_least_once", "exactly_once_v2"):
        config = StreamsConfig.from_mapping(
            {
                **BASE,
                "processing.guarantee": guarantee,
                "consumer.fetch.max.bytes": "1048576",
                "producer.linger.ms": "5",
            }
        )
        assert client_config_problems(config) == []
    assert time.monotonic() - started < 5  # no connection attempt to 127.0.0.1:1 was awaited


def test_a_client_that_refuses_the_combination_is_reported_whole() -> None:
    config = StreamsConfig.from_mapping({**BASE, "security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN"})

    problems = client_config_problems(config)

    assert problems and all("sasl.username and sasl.password must be set" in p for p in problems)
