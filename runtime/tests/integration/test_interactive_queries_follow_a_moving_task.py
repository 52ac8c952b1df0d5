"""Interactive queries (IQv2, KIP-796) on the real broker across two instance processes while tasks move between
them: every answer is either a running active task's (exact) or labelled stale (a standby's or a restoring
task's, never ahead of the truth), and a query sent to either instance is answered for the whole application
(forwarded to the owner through its ``application.server``; docs/interactive-queries.md).

Instance ``a`` counts colours alone; ``b`` joins (``num.standby.replicas: 1``, the classic protocol with short
session timeouts so the group settles fast) and takes some count tasks, which it restores from the changelog;
meanwhile both instances are queried in a loop. Then ``streamapp query`` asks one of them.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from streamapp.cli import main
from streamapp_harness import (
    KafkaTestClient,
    StreamAppInstance,
    color_events,
    count_by_color_topology,
    expected_color_counts,
    two_instances,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4


def _query(instance: StreamAppInstance, body: dict[str, Any], local: bool = False) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{instance.port}/query" + ("?local=true" if local else ""),
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _check(answer: dict[str, Any], expected: dict[str, int], seen: dict[str, int]) -> None:
    """Every partition answer: active = exact; standby / restoring = labelled stale and never above the truth."""
    for part in answer["partitions"]:
        if part["failure"]:
            seen["failed"] = seen.get("failed", 0) + 1
            continue
        seen[part["source"]] = seen.get(part["source"], 0) + 1
        assert part["stale"] == (part["source"] != "active"), part
        rows = {key: value for key, value in part["result"]}
        for key, value in rows.items():
            if part["source"] == "active":
                assert value == expected[key], f"{part['instance']} answered {key}={value}, not {expected[key]}"
            else:
                assert value <= expected[key], f"a stale answer is behind the truth, never ahead: {part}"


def test_queries_to_either_instance_stay_correct_and_labelled_while_a_task_moves(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    started = time.monotonic()
    app, source, output = unique("iq"), unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    topology = count_by_color_topology([source], output)
    a, b = two_instances(kafka, workdir, app, topology, advertise=True)
    instances.append(a.start())
    a.wait_ready()
    events = color_events(0, 6000, colors=40)
    expected = expected_color_counts(events)
    kafka.produce(source, events)
    wait_for(lambda: kafka.latest_longs(output) == expected, 60, "the counts", 0.5)

    code, one = _query(a, {"store": "counts", "type": "key", "key": "c1"})
    assert code == 200, one
    assert [(p["source"], p["result"], p["stale"]) for p in one["partitions"]] == [("active", expected["c1"], False)]
    code, everything = _query(a, {"store": "counts", "type": "range"})
    assert code == 200 and {k: v for p in everything["partitions"] for k, v in p["result"]} == expected

    seen: dict[str, int] = {}
    instances.append(b.start())
    deadline = time.monotonic() + 30

    def settled() -> bool:
        done = True
        for instance in (a, b):
            try:
                code, answer = _query(instance, {"store": "counts", "type": "range"})
            except OSError:  # b's server is not up yet
                code, answer = 0, None
            if code != 200:
                seen[f"http {code}"] = seen.get(f"http {code}", 0) + 1
                done = False
                continue
            _check(answer, expected, seen)
            owners = {p["instance"] for p in answer["partitions"] if p["source"] == "active"}
            done = done and owners == {f"{app}-a", f"{app}-b"}
            done = done and all(p["source"] == "active" for p in answer["partitions"])
        return done

    while not settled():
        assert time.monotonic() < deadline, f"the tasks did not settle on both instances; answers seen: {seen}"
        time.sleep(0.05)
    print(f"answers while the tasks moved: {seen}")

    # a keeps the tasks it lost to b as standbys: asked for them locally it answers labelled stale, never wrong
    metadata = json.loads(a.get("/metadata")[1])
    moved = {m["instance"]: m for m in metadata}[f"{app}-b"]["stores"]["counts"]
    assert moved and len(moved) < PARTITIONS, metadata

    def a_answers_from_standbys() -> bool:
        code, answer = _query(a, {"store": "counts", "type": "range", "partitions": moved}, local=True)
        assert code == 200, answer
        _check(answer, expected, seen)
        return all(p["source"] == "standby" and p["stale"] for p in answer["partitions"])

    wait_for(a_answers_from_standbys, 15, f"a to answer b's partitions {moved} from its standbys", 0.2)
    code, meta = a.get("/metadata/key?store=counts&key=%22c1%22")
    assert code == 200 and json.loads(meta)["active"]["endpoint"] in (f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}")

    # both instances answer every key, forwarding to the owner: a key query sent to the instance not owning it
    for color in ("c1", "c2", "c3", "c5", "c7"):
        for instance in (a, b):
            code, answer = _query(instance, {"store": "counts", "type": "key", "key": color})
            assert code == 200, answer
            (part,) = answer["partitions"]
            assert (part["source"], part["result"]) == ("active", expected[color]), part

    cli = CliRunner().invoke(main, ["query", "counts", "--url", f"http://127.0.0.1:{b.port}", "--key", "c2"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["partitions"][0]["result"] == expected["c2"]

    code, message = _query(a, {"store": "counts", "type": "window_key", "key": "c1", "time_from": 0, "time_to": 1})
    assert code == 400 and "key_value store" in message
    code, message = _query(b, {"store": "nope", "type": "key", "key": "c1"})
    assert code == 404 and "unknown store" in message
    print(f"interactive-query broker test: {time.monotonic() - started:.1f}s")
    assert a.stop() == 0 and b.stop() == 0
