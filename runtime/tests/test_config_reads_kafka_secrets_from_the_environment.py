"""librdkafka's security keys are accepted at the top level for every Kafka client, and ``StreamsConfig.load``
reads them from ``STREAMAPP_KAFKA_*`` environment variables or ``*_FILE`` files (a mounted Secret), which override
the config file; an unreadable file is an error that names the variable, never a value."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamapp.config import ConfigError, StreamsConfig
from streamapp.kafka.clients import admin_config, consumer_config, producer_config, restore_consumer_config

BASE = {"application.id": "app", "bootstrap.servers": "kafka:9094"}
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin"}


def test_top_level_security_keys_reach_every_kafka_client_and_a_client_key_overrides() -> None:
    config = StreamsConfig.from_mapping({**BASE, **SASL, "sasl.password": "s3cret", "consumer.sasl.username": "c"})
    for settings in (
        producer_config(config, 0, None),
        admin_config(config),
        restore_consumer_config(config, 0, None),
    ):
        assert {k: settings[k] for k in ("security.protocol", "sasl.mechanism", "sasl.password")} == {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.password": "s3cret",
        }
    assert consumer_config(config, 0, None)["sasl.username"] == "c"
    assert producer_config(config, 0, None)["sasl.username"] == "admin"
    assert StreamsConfig.from_mapping(config.to_mapping()) == config  # what a worker process receives


def test_the_password_comes_from_the_environment_and_overrides_the_file(tmp_path: Path) -> None:
    file = tmp_path / "streams.yaml"
    file.write_text("application.id: app\nbootstrap.servers: kafka:9094\nsasl.password: from-file\n")
    config = StreamsConfig.load(file, environ={"STREAMAPP_KAFKA_SASL_PASSWORD": "from-env"})
    assert admin_config(config)["sasl.password"] == "from-env"
    assert StreamsConfig.load(file, environ={}).producer["sasl.password"] == "from-file"


def test_a_secret_comes_from_a_mounted_file(tmp_path: Path) -> None:
    (tmp_path / "password").write_text("from-secret\n")
    environ = {
        "STREAMAPP_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "STREAMAPP_KAFKA_SASL_MECHANISM": "PLAIN",
        "STREAMAPP_KAFKA_SASL_USERNAME": "app",
        "STREAMAPP_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "password"),
        "STREAMAPP_KAFKA_SSL_CA_LOCATION": "/etc/kafka-tls/ca.crt",
    }
    settings = admin_config(StreamsConfig.load(None, BASE, environ=environ))
    assert settings == {
        "bootstrap.servers": "kafka:9094",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "app",
        "sasl.password": "from-secret",
        "ssl.ca.location": "/etc/kafka-tls/ca.crt",
    }


def test_an_unreadable_secret_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="STREAMAPP_KAFKA_SASL_PASSWORD_FILE: cannot read"):
        StreamsConfig.load(None, BASE, environ={"STREAMAPP_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "none")})
