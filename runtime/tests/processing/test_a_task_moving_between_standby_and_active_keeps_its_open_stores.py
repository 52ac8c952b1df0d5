"""A stream thread moves a task's state between its standby and its active task without reopening a store (Kafka
Streams' task recycling: ``TaskManager`` turns a ``StandbyTask`` into a ``StreamTask`` and back on one
``ProcessorStateManager``, ``ProcessorStateManager#transitionTaskType``).

One stream thread (instance ``b``) over the Kafka fakes and real RocksDB stores, with ``num.standby.replicas`` 1; the
group description is this test's: instance ``a`` owns the count task ``1_0`` (its input, the repartition
partition 0) until the thread is assigned it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from harness import APP, CHANGELOG, OUTPUT, REPARTITION, ThreadHarness, latest_counts, new_cluster
from kafka_fakes import FakeCluster
from streamapp.kafka.types import GroupDescription, GroupMember, TopicPartition
from streamapp.processing.stream_thread import StreamThread
from streamapp.processing.task import TaskId, TaskState
from streamapp.serdes import serde_for
from streamapp.state.directory import TaskDirectoryLock
from streamapp.state.stores import PersistentKeyValueStore

TASK = TaskId(1, 0)
INPUT = TopicPartition(REPARTITION, 0)
LONGS = serde_for("long")


def member(instance: str, thread: int, *partitions: TopicPartition) -> GroupMember:
    return GroupMember(f"{APP}-{instance}-StreamThread-{thread + 1}-consumer", None, partitions)


def owned_by(instance: str, thread: int = 0) -> GroupDescription:
    """A stable group in which ``instance``'s thread ``thread`` owns task 1_0 and this thread (``b``-0) is a member."""
    members = {(instance, thread): member(instance, thread, INPUT)}
    members.setdefault(("a", 0), member("a", 0))
    members.setdefault(("b", 0), member("b", 0))
    return GroupDescription("stable", tuple(members.values()))


def start_standby_thread(
    cluster: FakeCluster, tmp_path: Path, group: list[GroupDescription]
) -> tuple[ThreadHarness, StreamThread, Counter[str]]:
    """Thread ``b``-0 with a standby of 1_0 (``group[0]`` is what describing the group answers), counting the
    openings of each persistent store."""
    h = ThreadHarness(cluster, tmp_path, **{"commit.interval.ms": 0, "num.standby.replicas": 1})
    opened: Counter[str] = Counter()
    open_store = h.store_factory

    def counting_factory(name: str, path: Path) -> PersistentKeyValueStore:
        opened[name] += 1
        return open_store(name, path)

    h.store_factory = counting_factory
    thread = h.start(instance="b", describe_group=lambda: group[0])
    return h, thread, opened


def append_change(cluster: FakeCluster, color: str, count: int, timestamp: int) -> None:
    cluster.append(CHANGELOG, 0, color.encode(), LONGS.serialize(count), timestamp=timestamp)


def test_a_standby_promoted_to_active_and_moved_back_keeps_its_open_stores(tmp_path: Path) -> None:
    cluster = new_cluster()
    append_change(cluster, "red", 3, 1_000)  # written by the active task on instance a
    group = [owned_by("a")]
    h, thread, opened = start_standby_thread(cluster, tmp_path, group)
    h.run(3)
    assert thread.standbys is not None
    standby_state = thread.standbys.tasks[TASK].state_manager
    store = standby_state.stores["counts"]
    assert store.changelog_offset() == 0  # the standby applied a's changelog

    h.consumer.assign([INPUT])  # the task moves to this thread
    h.run(3, until=lambda: TASK in thread.tasks.tasks and thread.tasks.tasks[TASK].state is TaskState.RUNNING)

    active = thread.tasks.tasks[TASK]
    assert active.state is TaskState.RUNNING
    assert active.state_manager is standby_state and active.stores["counts"] is store
    assert TASK not in thread.standbys.tasks
    assert thread.tasks._reader.last_restored[str(TASK)] == 0  # the standby was at the changelog's end
    cluster.append(REPARTITION, 0, b"red", json.dumps({"n": 2, "color": "red"}).encode(), timestamp=5_000)
    h.run(5, until=lambda: latest_counts(cluster).get("red") == 4)
    assert latest_counts(cluster) == {"red": 4}  # counted on from the standby's state
    assert cluster.records(CHANGELOG)[-1].timestamp == 5_000  # logged at the active task's record time
    assert cluster.records(OUTPUT)[-1].timestamp == 5_000

    group[0] = owned_by("a")
    h.consumer.revoke([INPUT])  # the task moves back to instance a: this thread keeps a standby

    assert TASK not in thread.tasks.tasks
    assert thread.standbys.tasks[TASK].state_manager is standby_state
    assert standby_state.stores["counts"] is store
    thread.standbys.maybe_refresh(now_s=1e9)  # the plan places the task's standby here: kept
    assert thread.standbys.tasks[TASK].state_manager is standby_state
    append_change(cluster, "red", 5, 6_000)
    h.run(3, until=lambda: store.changelog_offset() == 2)
    assert store.changelog_offset() == 2  # the recycled standby follows a's changelog after its own writes
    assert opened == {"counts": 1}  # opened once, by the first standby


def test_a_recycled_standby_the_plan_does_not_want_releases_the_folder_at_the_first_stable_refresh(
    tmp_path: Path,
) -> None:
    cluster = new_cluster()
    group = [owned_by("a")]
    h, thread, opened = start_standby_thread(cluster, tmp_path, group)
    assert thread.standbys is not None
    h.consumer.assign([INPUT])
    h.run(3, until=lambda: thread.tasks.tasks[TASK].state is TaskState.RUNNING)
    state = thread.tasks.tasks[TASK].state_manager

    group[0] = GroupDescription("preparing_rebalance", ())
    h.consumer.revoke([INPUT])  # the task moves to another thread of this instance
    thread.standbys.maybe_refresh(now_s=1_000.0)  # the group is rebalancing: undecided, retried soon

    assert thread.standbys.tasks[TASK].state_manager is state and state.is_open
    group[0] = owned_by("b", thread=1)
    thread.standbys.maybe_refresh(now_s=1_000.2)  # stable: the owner is on this instance, no standby here

    assert TASK not in thread.standbys.tasks
    assert not state.is_open
    TaskDirectoryLock(tmp_path / APP / str(TASK)).release()  # the other thread can take the folder
    assert opened == {"counts": 1}
