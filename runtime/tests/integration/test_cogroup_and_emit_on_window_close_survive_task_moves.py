"""A windowed cogroup (KIP-150) and a windowed aggregation with ``EmitStrategy.on_window_close()`` (KIP-825) stay
exact under ``exactly_once_v2`` with Kafka's default record cache, on the real broker, while tasks move between
stream threads and instances (the house rule for stateful features; modelled on
``test_record_cache_loses_nothing_when_tasks_move``).

One application reads clicks and views (JSON, keyed by user, event time in ``ts``) with 2 stream threads over 4
partitions, in two branches of one sub-topology:

- ``clicks.group_by_key().cogroup(add_click).cogroup(views.group_by_key(), add_view)`` windowed by tumbling
  windows with a small grace, ``aggregate`` into ``{"clicks", "views"}`` per user and window, every update (behind
  the cache) to ``activity-updates``;
- ``clicks.merge(views).group_by_key()`` with the same windows and ``emit_strategy(on_window_close())``, one
  aggregator for both kinds, each window's final aggregate to ``final-activity`` (a windowed cogroup offers no emit
  strategy, as Kafka's ``TimeWindowedCogroupedKStream`` does not: docs/topology.md, "Cogroup").

The input comes in waves, half an event-time window each, so a window closes in every other wave, and a second
``streamapp run`` instance (2 threads) joins the group and leaves it in the middle of a window (the tasks it takes and
gives back go on from a restored store); a last record per partition closes the last windows. Both
branches must end with the aggregate computed here from the produced records, in their output and in their stores'
changelogs (what a restore rebuilds a store from). The final results are checked against what docs/topology.md
("Emit strategy") promises under exactly-once: each window emitted once, with its final aggregate, in window start
order per partition: a task started over a restored store resumes from the close time its last commit carried in
the offsets' metadata (Kafka's ``ProcessorMetadata``), so it emits no window again.
"""

from __future__ import annotations

import json
import signal
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamapp import EmitStrategy, StreamsBuilder
from streamapp.dsl.windowed import SessionWindowedKStream
from streamapp.dsl.windows import TimeWindows
from streamapp.partitioner import partition_for_key
from streamapp_harness import KafkaTestClient, StreamAppInstance, app_config, recent_window_start, unique
from test_record_cache_loses_nothing_when_tasks_move import _wait_until_counted

pytestmark = pytest.mark.integration

PARTITIONS = 4
USERS_PER_PARTITION = 2
WINDOW_MS, GRACE_MS = 10_000, 2_000
WAVE_MS = WINDOW_MS // 2
"""Event time per wave: a window spans two waves, so a move between them finds a window half aggregated (only its
restored store holds the first half), and the first records of every other wave close the window before."""
WAVES = 8
END = WAVES * WAVE_MS
"""Event time (after ``BASE``) past the waves' windows: a last record per partition at ``END + GRACE_MS`` closes
them."""
RECORDS_PER_USER_AND_WAVE = 4
WAVE_INTERVAL_S = 1.0
COMMIT_INTERVAL_MS = 1000
"""As long as a wave: the cache merges a window's updates, and a move finds emissions of open transactions."""
SECOND_JOINS_AT_WAVE, SECOND_LEAVES_AT_WAVE = 3, 5
"""Both in the middle of a window."""
BASE = recent_window_start(WINDOW_MS, seconds_ago=3600)
"""Event times start an hour back (output records carry them; the broker keeps them for 7 days)."""

Window = tuple[str, int]
"""``(user, window start)`` (epoch ms)."""
Event = tuple[str, dict[str, Any]]
"""A click or a view: ``(user, {"n": int, "kind": "click" | "view", "ts": epoch ms})``."""


def activity_topology(clicks: str, views: str, updates: str, finals: str) -> dict[str, Any]:
    """The two branches (module docstring) as ``StreamsBuilder`` builds them; both outputs keyed by user (so a
    task's records go to its own partition, in order), values ``{"start", "clicks", "views"}``."""
    functions = "integration_functions"
    builder = StreamsBuilder()
    serdes: dict[str, Any] = {"key_serde": "string", "value_serde": "json"}
    event_time = {"type": "field", "field": "ts"}
    click = builder.stream(clicks, name="clicks", timestamp_extractor=event_time, **serdes)
    view = builder.stream(views, name="views", timestamp_extractor=event_time, **serdes)
    windows = TimeWindows.of_size_and_grace(WINDOW_MS, GRACE_MS)
    retention = END + 2 * WINDOW_MS + GRACE_MS
    (
        click.group_by_key()
        .cogroup(f"{functions}:add_click")
        .cogroup(view.group_by_key(), f"{functions}:add_view")
        .windowed_by(windows)
        .aggregate(f"{functions}:no_activity", name="activity", store="activity-store", retention_ms=retention)
        .to_stream(name="activity-changes")
        .map(f"{functions}:user_and_window", name="activity-per-user")
        .to(updates, name="updates-out", key_serde="string", value_serde="json")
    )
    merged = click.merge(view, name="clicks-and-views").group_by_key().windowed_by(windows)
    assert not isinstance(merged, SessionWindowedKStream)
    (
        merged.emit_strategy(EmitStrategy.on_window_close())
        .aggregate(
            f"{functions}:no_activity",
            f"{functions}:add_activity",
            name="final-activity",
            store="final-activity-store",
            retention_ms=retention,
        )
        .to_stream(name="final-changes")
        .map(f"{functions}:user_and_window", name="final-per-user")
        .to(finals, name="finals-out", key_serde="string", value_serde="json")
    )
    return builder.build().to_dict()


def _users() -> dict[int, list[str]]:
    """``USERS_PER_PARTITION`` users per partition (Kafka's default partitioner, as the producer's and the sinks')."""
    users: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    n = 0
    while any(len(found) < USERS_PER_PARTITION for found in users.values()):
        user = f"user-{n}"
        found = users[partition_for_key(user.encode(), PARTITIONS)]
        if len(found) < USERS_PER_PARTITION:
            found.append(user)
        n += 1
    return users


def _wave(wave: int, users: list[str]) -> tuple[list[Event], list[Event]]:
    """The clicks and the views of ``wave``: per user ``RECORDS_PER_USER_AND_WAVE`` records, a user-and-wave
    dependent share of them clicks, in event-time order across ``WAVE_MS`` from ``BASE + wave * WAVE_MS``."""
    clicks: list[Event] = []
    views: list[Event] = []
    records = [(user, i) for i in range(RECORDS_PER_USER_AND_WAVE) for user in users]
    step = WAVE_MS // len(records)
    for n, (user, i) in enumerate(records):
        is_click = i <= (wave + users.index(user)) % RECORDS_PER_USER_AND_WAVE
        value = {"n": n, "kind": "click" if is_click else "view", "ts": BASE + wave * WAVE_MS + n * step}
        (clicks if is_click else views).append((user, value))
    return clicks, views


def _add(expected: dict[Window, dict[str, int]], records: list[Event]) -> None:
    for user, value in records:
        start = value["ts"] - value["ts"] % WINDOW_MS
        activity = expected.setdefault((user, start), {"clicks": 0, "views": 0})
        activity["clicks" if value["kind"] == "click" else "views"] += 1


def _second_joins_and_leaves(second: StreamAppInstance) -> dict[int, Callable[[], str]]:
    """What happens to ``second`` before a wave, by wave: it joins the group (ready, so in the group with tasks: it
    leaves with a revocation, not a timeout) and later leaves it by a clean shutdown while the input flows."""

    def join() -> str:
        second.start().wait_ready()
        return "second instance ready"

    def leave() -> str:
        assert second.process is not None
        second.process.send_signal(signal.SIGTERM)
        return "second instance stopping"

    return {SECOND_JOINS_AT_WAVE: join, SECOND_LEAVES_AT_WAVE: leave}


def _produce_waves(
    kafka: KafkaTestClient, clicks: str, views: str, second: StreamAppInstance
) -> tuple[dict[Window, dict[str, int]], list[str]]:
    """Produce the waves (starting and stopping ``second`` on the way) and a last click per partition that closes
    every wave's window; returns the aggregate of every window and what happened when."""
    users = _users()
    everyone = [user for found in users.values() for user in found]
    moves = _second_joins_and_leaves(second)
    expected: dict[Window, dict[str, int]] = {}
    events: list[str] = []
    started = time.monotonic()
    for wave in range(WAVES):
        if wave in moves:
            events.append(f"{moves[wave]()} at {time.monotonic() - started:.1f}s")
        wave_clicks, wave_views = _wave(wave, everyone)
        kafka.produce(clicks, wave_clicks)
        kafka.produce(views, wave_views)
        _add(expected, wave_clicks + wave_views)
        time.sleep(WAVE_INTERVAL_S)
    last = [(found[0], {"n": -1, "kind": "click", "ts": BASE + END + GRACE_MS}) for found in users.values()]
    kafka.produce(clicks, last)
    _add(expected, last)
    events.append(f"input produced at {time.monotonic() - started:.1f}s")
    return expected, events


def _outputs(kafka: KafkaTestClient, topic: str) -> dict[int, list[tuple[Window, dict[str, int]]]]:
    """The committed records of an output topic per partition, in offset order."""
    out: dict[int, list[tuple[Window, dict[str, int]]]] = {}
    for partition, _, key, value in sorted(kafka.read_committed(topic)):
        assert key is not None and value is not None
        activity = json.loads(value)
        start = activity.pop("start")
        out.setdefault(partition, []).append(((key.decode(), start), activity))
    return out


def _latest(records: dict[int, list[tuple[Window, dict[str, int]]]]) -> dict[Window, dict[str, int]]:
    return {window: activity for partition in sorted(records) for window, activity in records[partition]}


def _changelog(kafka: KafkaTestClient, topic: str) -> dict[Window, dict[str, int]]:
    """The last aggregate per window in a window store's changelog (key: user + 8-byte start + 4-byte seqnum;
    value: 8-byte timestamp + JSON), what a restore applies."""
    latest: dict[Window, dict[str, int]] = {}
    for _, _, key, value in sorted(kafka.read_committed(topic)):
        assert key is not None
        window = (key[:-12].decode(), struct.unpack(">q", key[-12:-4])[0])
        if value is None:
            latest.pop(window, None)
        else:
            latest[window] = json.loads(value[8:])
    return latest


def _backwards(finals: dict[int, list[tuple[Window, dict[str, int]]]]) -> list[str]:
    """Final results that go back past their partition's last emitted window start (a task emits its windows by
    start), or that are not in their user's partition (then a partition would not hold one task's emissions in
    order)."""
    wrong = []
    for partition, records in sorted(finals.items()):
        latest = -1
        for (user, start), activity in records:
            if partition != partition_for_key(user.encode(), PARTITIONS):
                wrong.append(f"partition {partition}: {user}@{start - BASE} is not in its user's partition")
            if start < latest:
                wrong.append(f"partition {partition}: {user}@{start - BASE} {activity} after start {latest - BASE}")
            latest = max(latest, start)
    return wrong


def _repeats(finals: dict[int, list[tuple[Window, dict[str, int]]]]) -> dict[Window, list[dict[str, int]]]:
    """The windows emitted more than once, with every emission's aggregate."""
    emissions: dict[Window, list[dict[str, int]]] = {}
    for records in finals.values():
        for window, activity in records:
            emissions.setdefault(window, []).append(activity)
    return {window: found for window, found in emissions.items() if len(found) > 1}


def _relative(windows: dict[Window, Any]) -> dict[str, Any]:
    """Windows named ``user@start - BASE`` for assertion messages."""
    return {f"{user}@{start - BASE}": value for (user, start), value in sorted(windows.items())}


def test_cogroup_and_final_window_results_are_exact_and_emitted_once_under_exactly_once_while_instances_join_and_leave(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    app = unique("cogroup-moves")
    clicks, views, updates, finals = unique("clicks"), unique("views"), unique("activity"), unique("final-activity")
    kafka.create_topics({clicks: PARTITIONS, views: PARTITIONS, updates: PARTITIONS, finals: PARTITIONS})
    topology = activity_topology(clicks, views, updates, finals)
    config = {
        **app_config(kafka, app, workdir),  # Kafka's default record cache (10 MiB)
        "num.stream.threads": 2,
        "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": COMMIT_INTERVAL_MS,
    }
    first, second = (
        StreamAppInstance(workdir / name, topology, {**config, "state.dir": str(workdir / f"{name}-state")})
        for name in ("first", "second")
    )
    instances.extend([first.start(), second])
    first.wait_ready()
    started = time.monotonic()
    expected, events = _produce_waves(kafka, clicks, views, second)
    _wait_until_counted(kafka, app, [clicks, views], exact=True)
    events.append(f"aggregated at {time.monotonic() - started:.1f}s")
    assert second.stop() == 0, second.log_tail()
    first.assert_running()
    assert first.stop() == 0, first.log_tail()

    closed = {(user, start): agg for (user, start), agg in expected.items() if start < BASE + END}
    emitted = _outputs(kafka, finals)
    repeats = _repeats(emitted)
    run = f"{len(expected)} windows, {len(repeats)} emitted again; {'; '.join(events)}; logs {workdir}"
    assert _relative(_latest(_outputs(kafka, updates))) == _relative(expected), f"cogroup output; {run}"
    assert _relative(_changelog(kafka, f"{app}-activity-store-changelog")) == _relative(expected), run
    assert _relative(_latest(emitted)) == _relative(closed), f"final results; {run}"
    assert not _backwards(emitted), f"final results emitted again out of order: {_backwards(emitted)}; {run}"
    assert not repeats, f"final results emitted twice: {_relative(repeats)}; {run}"
    assert _relative(_changelog(kafka, f"{app}-final-activity-store-changelog")) == _relative(expected), run
