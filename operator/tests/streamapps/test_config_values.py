"""``spec.config`` takes unquoted YAML numbers and booleans: each is kept as the string the runtime's streams.yaml
and librdkafka read (``true``/``false``, decimal), so the runtime, the librdkafka settings check and
``replication.factor`` see one form; a list, an object or a null is refused naming the key."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from operator_fakes import UNQUOTED, flights_spec
from pydantic import ValidationError
from streamapp.config import StreamsConfig
from streamapp.kafka.config_check import client_config_problems
from streamapp_operator.streamapps import desired
from streamapp_operator.streamapps.resources import StreamAppSpec, config_text


def _spec(config: dict[str, Any]) -> StreamAppSpec:
    return StreamAppSpec.parse({**flights_spec(), "config": config})


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1000, "1000"),
        (0, "0"),
        (-1, "-1"),
        (True, "true"),
        (False, "false"),
        (0.5, "0.5"),
        (1e-05, "1e-05"),
        ("5", "5"),
    ],
)
def test_a_number_or_boolean_is_the_string_librdkafka_and_kafka_streams_read(value: Any, text: str) -> None:
    assert config_text(value) == text and _spec({"k": value}).config == {"k": text}


def test_unquoted_numbers_and_booleans_render_into_streams_yaml_as_the_runtime_and_librdkafka_take_them() -> None:
    spec = _spec(yaml.safe_load(UNQUOTED))
    assert spec.config["producer.enable.idempotence"] == "true" and spec.config["commit.interval.ms"] == "1000"
    streams = desired.streams_config(spec, "flights")
    config = StreamsConfig.from_mapping(yaml.safe_load(yaml.safe_dump(streams)))  # the runtime's own parse
    assert config.commit_interval_ms == 1000 and config.statestore_cache_max_bytes == 0
    assert client_config_problems(config) == []  # librdkafka took "true", "false" and "0.5"
    assert int(spec.config["replication.factor"]) == 1


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, None])
def test_a_list_an_object_or_a_null_is_refused_naming_the_key(value: Any) -> None:
    with pytest.raises(ValidationError, match=r"config\.bad"):
        _spec({"bad": value})
