"""The Processor API: punctuation follows Kafka's PunctuationQueue (stream time aligned to 0, wall clock
from now + interval, missed intervals skipped, cancel from inside a punctuator), contexts forward to the
node's children, stores are reachable by name, and init/close frame a task's running life."""

from __future__ import annotations

from typing import Any

import pytest
from conformance import dsl_functions as fn
from streamapp import StreamsBuilder
from streamapp.processor import Processor, PunctuationType, Record
from streamapp.processors.process import NodeProcessorContext, ProcessorHooks, PunctuationError
from streamapp.testing import TopologyTestDriver


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))


class Clock:
    def __init__(self) -> None:
        self.stream_time = -1
        self.wall = 0


def hooks_and_context() -> tuple[ProcessorHooks, NodeProcessorContext, Collect, Clock]:
    clock, out = Clock(), Collect()
    hooks = ProcessorHooks("0_0", "app", lambda: clock.stream_time, lambda: clock.wall)
    return hooks, NodeProcessorContext("p", hooks, {}, [out]), out, clock


def test_stream_time_punctuation_is_aligned_to_zero_and_fires_once_per_advance() -> None:
    hooks, ctx, _, clock = hooks_and_context()
    fired: list[int] = []
    ctx.schedule(10, PunctuationType.STREAM_TIME, fired.append)
    assert not hooks.punctuate_stream_time()  # stream time unknown
    for stream_time in (3, 9, 10, 35, 39, 40):
        clock.stream_time = stream_time
        hooks.punctuate_stream_time()
    assert fired == [3, 10, 35, 40]


def test_wall_clock_punctuation_starts_one_interval_after_scheduling_and_skips_missed_intervals() -> None:
    hooks, ctx, _, clock = hooks_and_context()
    clock.wall = 1_000
    fired: list[int] = []
    ctx.schedule(100, PunctuationType.WALL_CLOCK_TIME, fired.append)
    for now in (1_099, 1_100, 1_450, 1_499, 1_500):
        hooks.punctuate_wall_clock(now)
    assert fired == [1_100, 1_450, 1_500]


def test_a_punctuator_can_cancel_its_own_schedule() -> None:
    hooks, ctx, _, clock = hooks_and_context()
    fired: list[int] = []

    def once(ts: int) -> None:
        fired.append(ts)
        schedule.cancel()

    schedule = ctx.schedule(5, PunctuationType.STREAM_TIME, once)
    for clock.stream_time in (1, 6, 11):
        hooks.punctuate_stream_time()
    assert fired == [1]


def test_schedules_due_together_run_in_due_time_order() -> None:
    hooks, ctx, _, clock = hooks_and_context()
    order: list[str] = []
    ctx.schedule(7, PunctuationType.STREAM_TIME, lambda ts: order.append("seven"))
    ctx.schedule(3, PunctuationType.STREAM_TIME, lambda ts: order.append("three"))
    clock.stream_time = 0
    hooks.punctuate_stream_time()
    clock.stream_time = 6
    hooks.punctuate_stream_time()
    assert order == ["seven", "three", "three"]


def test_an_interval_below_one_millisecond_is_refused() -> None:
    _, ctx, _, _ = hooks_and_context()
    with pytest.raises(ValueError, match="minimum punctuation interval is 1 ms"):
        ctx.schedule(0, PunctuationType.STREAM_TIME, lambda ts: None)


def test_a_failing_punctuator_raises_a_punctuation_error_naming_the_node() -> None:
    hooks, ctx, _, clock = hooks_and_context()
    ctx.schedule(1, PunctuationType.STREAM_TIME, lambda ts: 1 // 0)
    clock.stream_time = 4
    with pytest.raises(PunctuationError, match="node 'p': STREAM_TIME punctuator failed at 4: ZeroDivisionError"):
        hooks.punctuate_stream_time()


def test_forward_in_a_punctuator_uses_the_punctuation_time_and_a_record_keeps_its_own() -> None:
    hooks, ctx, out, clock = hooks_and_context()

    def emit(ts: int) -> None:
        ctx.forward("k", "v")
        ctx.forward(Record("r", "w", 99))
        ctx.forward("t", "x", timestamp=7)

    ctx.schedule(10, PunctuationType.STREAM_TIME, emit)
    clock.stream_time = 12
    hooks.punctuate_stream_time()
    assert out.records == [("k", "v", 12), ("r", "w", 99), ("t", "x", 7)]


def test_forward_of_key_and_value_outside_process_and_punctuators_is_an_error() -> None:
    _, ctx, _, _ = hooks_and_context()
    with pytest.raises(RuntimeError, match="only allowed in process or a punctuator"):
        ctx.forward("k", "v")


def test_an_undeclared_store_is_a_key_error_listing_the_nodes_stores() -> None:
    _, ctx, _, _ = hooks_and_context()
    with pytest.raises(KeyError, match="node 'p' has no store 'nope'; its stores: \\(none\\)"):
        ctx.get_state_store("nope")


def test_record_copies_are_immutable_and_refuse_negative_timestamps() -> None:
    record = Record("k", 1, 5)
    assert record.with_key("j").with_value(2).with_timestamp(6) == Record("j", 2, 6)
    assert record == Record("k", 1, 5)
    with pytest.raises(ValueError, match="must not be negative"):
        record.with_timestamp(-1)


def dedupe_topology() -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.add_state_store("seen", key_serde="string", value_serde="long")
    (
        builder.stream("in", key_serde="string", value_serde="long", name="in")
        .process(fn.Dedupe, stores=["seen"], name="dedupe")
        .to("out", name="out")
    )
    return builder


def test_processor_state_store_writes_go_to_the_changelog_and_survive_in_the_store() -> None:
    with TopologyTestDriver(dedupe_topology(), {"application.id": "api"}) as driver:
        source = driver.create_input_topic("in")
        for key, ts in [("a", 1), ("b", 2), ("a", 3)]:
            source.pipe_input(key, 0, ts)
        out = driver.create_output_topic("out").read_key_values_to_list()
        changelog = driver.create_output_topic("api-seen-changelog").read_key_values_to_list()
        assert out == [("a", 0), ("b", 0)]
        assert changelog == [("a", 1), ("b", 2)]
        assert driver.get_key_value_store("seen").get("a") == 1


def test_init_runs_once_the_task_runs_and_close_when_it_closes() -> None:
    fn.LIFECYCLE.clear()
    builder = StreamsBuilder()
    builder.stream("in", key_serde="string", value_serde="long", name="in").process(fn.Lifecycle, name="life")
    builder.build()
    driver = TopologyTestDriver(builder, {"application.id": "life"})
    driver.create_input_topic("in").pipe_input("a", 1, 1)
    driver.close()
    assert fn.LIFECYCLE == ["init 0_0 life", "process a", "close"]


def test_a_class_that_is_not_a_processor_is_refused_when_the_task_builds() -> None:
    builder = StreamsBuilder()
    builder.stream("in", name="in").process("conformance.dsl_functions:NotAProcessor", name="p")
    with pytest.raises(Exception, match=r"not a streamapp\.processor\.Processor"):
        TopologyTestDriver(builder, {"application.id": "x"}).close()


def test_processor_base_keeps_the_context() -> None:
    class Keep(Processor):
        def process(self, record: Record) -> None:
            pass

    _, ctx, _, _ = hooks_and_context()
    keep = Keep()
    keep.init(ctx)
    assert keep.context is ctx
    assert (ctx.task_id, ctx.application_id) == ("0_0", "app")
