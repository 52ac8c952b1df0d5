"""KafkaStreams (the supervisor) without a broker: fail fast on unusable topologies."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from streamapp.app import KafkaStreams
from streamapp.config import StreamsConfig
from streamapp.topology import TopologyDescription

TOPOLOGY = {
    "nodes": [
        {"name": "in", "type": "source", "topics": ["in"]},
        {"name": "f", "type": "filter", "input": "in", "predicate": "no_such_module_here:keep"},
        {"name": "out", "type": "sink", "input": "f", "topic": "out"},
    ]
}


def test_run_fails_fast_when_a_user_function_cannot_be_imported(tmp_path: Path) -> None:
    config = StreamsConfig.from_mapping(
        {
            "application.id": "app",
            "bootstrap.servers": "127.0.0.1:1",
            "http.port": 0,
            "state.dir": str(tmp_path),
        }
    )
    before = signal.getsignal(signal.SIGTERM)
    app = KafkaStreams(TopologyDescription.from_dict(TOPOLOGY), config, http_host="127.0.0.1")
    assert app.run() == 1
    assert signal.getsignal(signal.SIGTERM) is before
    assert app.readiness() == (False, "instance is stopped")


def test_instance_id_and_http_host_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMAPP_INSTANCE_ID", "flights-1")
    monkeypatch.setenv("STREAMAPP_HTTP_HOST", "127.0.100.7")
    config = StreamsConfig.from_mapping({"application.id": "app", "bootstrap.servers": "x:1"})
    app = KafkaStreams(TopologyDescription.from_dict(TOPOLOGY), config)
    assert (app.instance_id, app.http_host) == ("flights-1", "127.0.100.7")
    monkeypatch.delenv("STREAMAPP_INSTANCE_ID")
    monkeypatch.delenv("STREAMAPP_HTTP_HOST")
    app = KafkaStreams(TopologyDescription.from_dict(TOPOLOGY), config)
    assert (app.instance_id, app.http_host) == (None, "0.0.0.0")


def test_run_fails_when_the_http_port_is_taken(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = StreamsConfig.from_mapping(
            {"application.id": "app", "bootstrap.servers": "127.0.0.1:1", "http.port": port, "state.dir": str(tmp_path)}
        )
        app = KafkaStreams(TopologyDescription.from_dict(TOPOLOGY), config, http_host="127.0.0.1")
        assert app.run() == 1
