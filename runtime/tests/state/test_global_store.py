"""Global stores (GlobalKTable state): bootstrap before processing, all partitions, checkpoint, resume, reset."""

from __future__ import annotations

from pathlib import Path

import pytest
from global_fakes import FakeGlobalConsumer
from kafka_fakes import FakeCluster
from streamapp.kafka.types import KafkaClientError, TopicPartition
from streamapp.processing.global_thread import GlobalStreamThread
from streamapp.state.checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streamapp.state.global_store import GlobalStateManager, GlobalStoreSpec, ReadOnlyStoreError, global_state_dir
from streamapp.state.rocksdb import RocksDBMemory, RocksDBStore

SPEC = GlobalStoreSpec(name="users-store", topic="users", key_serde="string", value_serde="json")


@pytest.fixture
def memory() -> RocksDBMemory:
    return RocksDBMemory(block_cache_bytes=8 << 20, write_buffer_bytes=2 << 20)


@pytest.fixture
def cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.create_topic("users", 3)
    return cluster


def _thread(
    cluster: FakeCluster, directory: Path, memory: RocksDBMemory, clock: list[float] | None = None
) -> tuple[GlobalStreamThread, FakeGlobalConsumer]:
    state = GlobalStateManager([SPEC], directory, lambda name, path: RocksDBStore(name, path, memory))
    consumer = FakeGlobalConsumer(cluster)
    now = clock if clock is not None else [0.0]
    return GlobalStreamThread(state, consumer, commit_interval_ms=1000, clock=lambda: now[0]), consumer


def _user(cluster: FakeCluster, partition: int, name: str, region: str | None) -> int:
    value = None if region is None else b'{"region": "%s"}' % region.encode()
    return cluster.append("users", partition, name.encode(), value)


def test_bootstrap_reads_every_partition_to_its_end_before_returning(
    cluster: FakeCluster, tmp_path: Path, memory: RocksDBMemory
) -> None:
    _user(cluster, 0, "alice", "north")
    _user(cluster, 1, "bob", "south")
    _user(cluster, 2, "carol", "east")
    _user(cluster, 2, "carol", "west")
    thread, _ = _thread(cluster, tmp_path, memory)
    assert thread.bootstrap(lambda: False)
    users = thread.global_state.typed_store("users-store")
    assert [users.get(n) for n in ("alice", "bob", "carol")] == [
        {"region": "north"},
        {"region": "south"},
        {"region": "west"},
    ]
    assert thread.state == "running"
    thread.close()


def test_tombstones_delete_and_null_keys_are_skipped(
    cluster: FakeCluster, tmp_path: Path, memory: RocksDBMemory
) -> None:
    _user(cluster, 0, "alice", "north")
    _user(cluster, 0, "alice", None)
    cluster.append("users", 1, None, b'{"region": "nowhere"}')
    thread, _ = _thread(cluster, tmp_path, memory)
    thread.bootstrap(lambda: False)
    assert thread.global_state.typed_store("users-store").get("alice") is None
    assert list(thread.global_state.store("users-store").items()) == []
    thread.close()


def test_updates_after_bootstrap_reach_the_store_on_poll(
    cluster: FakeCluster, tmp_path: Path, memory: RocksDBMemory
) -> None:
    thread, _ = _thread(cluster, tmp_path, memory)
    thread.bootstrap(lambda: False)
    _user(cluster, 1, "bob", "south")
    assert thread.poll(0.0) == 1
    assert thread.global_state.typed_store("users-store").get("bob") == {"region": "south"}
    thread.close()


def test_restart_resumes_from_the_checkpoint_without_rereading(
    cluster: FakeCluster, tmp_path: Path, memory: RocksDBMemory
) -> None:
    _user(cluster, 0, "alice", "north")
    _user(cluster, 1, "bob", "south")
    thread, _ = _thread(cluster, tmp_path, memory)
    thread.bootstrap(lambda: False)
    thread.close()
    assert OffsetCheckpoint(tmp_path / CHECKPOINT_FILE_NAME).read() == {
        TopicPartition("users", 0): 1,
        TopicPartition("users", 1): 1,
    }
    _user(cluster, 1, "bob", "west")
    again, consumer = _thread(cluster, tmp_path, memory)
    again.bootstrap(lambda: False)
    assert consumer.assignments[0] == {
        TopicPartition("users", 0): 1,
        TopicPartition("users", 1): 1,
        TopicPartition("users", 2): 0,
    }
    assert again.restored_records == 1
    users = again.global_state.typed_store("users-store")
    assert users.get("alice") == {"region": "north"} and users.get("bob") == {"region": "west"}
    again.close()


def test_checkpoint_outside_the_log_wipes_the_store_and_bootstraps_from_the_beginning(
    cluster: FakeCluster, tmp_path: Path, memory: RocksDBMemory
) -> None:
    _user(cluster, 0, "alice", "north")
    _user(cluster, 0, "ghost", "gone")
    thread, _ = _thread(cluster, tmp_path, memory)
    thread.bootstrap(lambda: False)
    thread.close()
    # the topic was recreated: fewer records than the checkpoint says were read
    cluster.topics["users"] = [[] for _ in range(3)]
    _user(cluster, 0, "alice", "south")
    again, consumer = _thread(cluster, tmp_path, memory)
    again.bootstrap(lambda: False)
    assert consumer.assignments[0][TopicPartition("users", 0)] == 0
    users = again.global_state.typed_store("users-store")
    assert users.get("alice") == {"region": "south"} and users.get("ghost") is None
    again.close()


def test_checkpoint_is_written_every_commit_interval(
    cluster: FakeCluster, tmp_path: Path, memory: RocksDBMemory
) -> None:
    clock = [0.0]
    thread, _ = _thread(cluster, tmp_path, memory, clock)
    thread.bootstrap(lambda: False)
    checkpoint = OffsetCheckpoint(tmp_path / CHECKPOINT_FILE_NAME)
    _user(cluster, 2, "carol", "east")
    thread.poll(0.0)
    assert checkpoint.read().get(TopicPartition("users", 2), 0) == 0
    clock[0] = 1.5
    thread.poll(0.0)
    assert checkpoint.read()[TopicPartition("users", 2)] == 1
    thread.close()


def test_processors_cannot_write_a_global_store(cluster: FakeCluster, tmp_path: Path, memory: RocksDBMemory) -> None:
    thread, _ = _thread(cluster, tmp_path, memory)
    thread.bootstrap(lambda: False)
    with pytest.raises(ReadOnlyStoreError, match="users-store"):
        thread.global_state.typed_store("users-store").put("alice", {"region": "x"})
    thread.close()


def test_bootstrap_stops_when_asked(cluster: FakeCluster, tmp_path: Path, memory: RocksDBMemory) -> None:
    _user(cluster, 0, "alice", "north")
    thread, consumer = _thread(cluster, tmp_path, memory)
    consumer.poll = lambda max_records, timeout_s: ([], set())  # type: ignore[method-assign]  # a silent broker
    answers = iter([False, False, True])
    assert not thread.bootstrap(lambda: next(answers))
    assert thread.state == "restoring"
    thread.close()


def test_a_missing_global_topic_is_a_clear_error(tmp_path: Path, memory: RocksDBMemory) -> None:
    thread, _ = _thread(FakeCluster(), tmp_path, memory)
    with pytest.raises(KafkaClientError, match="global topic 'users'"):
        thread.bootstrap(lambda: False)
    thread.close()


def test_each_worker_has_its_own_global_folder(tmp_path: Path) -> None:
    assert global_state_dir(tmp_path / "app", 0) != global_state_dir(tmp_path / "app", 1)
    assert global_state_dir(tmp_path / "app", 1) == tmp_path / "app" / "global" / "1"
