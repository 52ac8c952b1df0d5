"""The instance server's query routes (``streamapp.query.http`` on a real ``MonitoringServer``) and the
``streamapp query`` command against them: answers as JSON with their labels, bad requests as 4xx with a message,
503 before the instance runs (``KafkaStreams.query`` too); the command names stale partitions on stderr."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from query_fakes import FakeInstances, FakeThread, counts_builder, key_on, member, router
from streamapp.app import KafkaStreams
from streamapp.cli import main
from streamapp.commands.query import query_body
from streamapp.config import StreamsConfig
from streamapp.monitoring.server import MonitoringServer
from streamapp.query.http import QueryRoutes
from streamapp.query.requests import KeyQuery, QueryError, StateQueryRequest
from streamapp.query.router import InteractiveQueries

RUNNING: dict[str, InteractiveQueries | None] = {"queries": None}


@pytest.fixture
def server() -> Iterator[str]:
    threads = [FakeThread({0: ("active", 4), 1: ("standby", 2)})]
    RUNNING["queries"] = router(threads, [member("me", 0, 1, endpoint="me:1")], FakeInstances({}))
    srv = MonitoringServer(
        "127.0.0.1",
        0,
        lambda: (True, "ok"),
        lambda: (True, "ok"),
        CollectorRegistry(auto_describe=False),
        dict,
        extra_routes=QueryRoutes(lambda: RUNNING["queries"]),
    )
    srv.start()
    yield f"http://127.0.0.1:{srv.port}"
    srv.stop()


def call(url: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


def test_a_query_is_answered_as_json_with_each_partitions_label(server: str) -> None:
    code, answer = call(f"{server}/query", {"store": "counts", "type": "range"})
    assert code == 200
    assert [(p["partition"], p["source"], p["stale"], p["result"]) for p in answer["partitions"]] == [
        (0, "active", False, 4),
        (1, "standby", True, 2),
    ]
    assert answer["stale"] is True
    code, metadata = call(f"{server}/metadata/key?store=counts&key=%22{key_on(1)}%22")
    assert code == 200 and metadata["active"] == {"instance": "me", "endpoint": "me:1"}
    assert call(f"{server}/metadata")[1][0]["stores"] == {"counts": [0, 1]}


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/query", b"{not json", 400, "the request body is not JSON"),
        ("/query", b'{"store": "nope", "type": "key", "key": "a"}', 404, "unknown store 'nope'"),
        ("/query", b'{"store": "counts", "type": "key", "key": 5}', 400, "does not fit its key serde"),
        ("/query", None, 405, "/query takes POST"),
        ("/metadata/key?store=counts", None, 400, "needs ?store=<name>&key=<JSON key>"),
    ],
)
def test_a_bad_request_is_a_4xx_with_a_message(
    server: str, path: str, body: bytes | None, status: int, message: str
) -> None:
    code, text = call(server + path, raw=body)
    assert code == status and message in text


def test_before_the_stream_threads_run_queries_are_503(server: str) -> None:
    RUNNING["queries"] = None
    assert call(f"{server}/query", {"store": "counts", "type": "range"}) == (503, "the instance is not running yet")


def test_the_query_command_prints_the_answer_and_names_stale_partitions(server: str) -> None:
    result = CliRunner().invoke(main, ["query", "counts", "--url", server])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["partitions"][0]["result"] == 4
    assert "partition 1: stale, answered by a standby task" in result.stderr
    refused = CliRunner().invoke(main, ["query", "nope", "--url", server, "--key", "a"])
    assert refused.exit_code == 1 and "HTTP 404" in refused.output and "unknown store 'nope'" in refused.output


@pytest.mark.parametrize(
    ("options", "body"),
    [
        ({"key": "a"}, {"store": "s", "type": "key", "key": "a"}),
        ({"lower": "a"}, {"store": "s", "type": "range", "lower": "a", "upper": None}),
        ({"key": "a", "time_from": 5}, {"store": "s", "type": "window_key", "key": "a", "time_from": 5,
                                        "time_to": 2**63 - 1}),
        ({"time_to": 9}, {"store": "s", "type": "window_range", "key": None, "time_from": 0, "time_to": 9}),
    ],
)  # fmt: skip
def test_the_command_picks_the_query_kind_from_its_options(options: dict[str, Any], body: dict[str, Any]) -> None:
    assert query_body("s", **options) == body


def test_the_python_api_refuses_queries_before_the_instance_runs(tmp_path: Path) -> None:
    config = StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "x:1", "state.dir": str(tmp_path)})
    streams = KafkaStreams(counts_builder().build(config.to_mapping()), config)
    with pytest.raises(QueryError, match="not running yet") as info:
        streams.query(StateQueryRequest("counts", KeyQuery("a")))
    assert info.value.status == 503
