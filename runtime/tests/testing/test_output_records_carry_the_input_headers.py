"""Output records carry the headers of the input record that caused them (Kafka's ``Record.headers()`` /
``ProcessorContext.headers()``): every record forwarded while processing a record, through repartitions and
aggregations; a suppressed window result carries the headers of the last record that updated it; a processor
may replace them with ``Record.with_headers``; a punctuation forwards without headers."""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder
from streamapp.dsl.windows import Suppressed, TimeWindows
from streamapp.processor import Processor, ProcessorContext, PunctuationType, Record
from streamapp.testing import TestRecord, TopologyTestDriver


def first_letter(key: Any, value: Any) -> Any:
    return value[0]


def test_a_stream_and_a_count_after_a_repartition_write_the_headers_of_the_record_they_process() -> None:
    builder = StreamsBuilder()
    words = builder.stream("words", key_serde="string", value_serde="string", name="words")
    words.map_values(str.upper, name="upper").to("upper", name="upper-out")
    (
        words.group_by(first_letter, name="by-letter", key_serde="string")
        .count(name="per-letter", store="per-letter-store")
        .to_stream(name="changes")
        .to("per-letter", name="count-out", value_serde="long")
    )
    with TopologyTestDriver(builder) as driver:
        source = driver.create_input_topic("words")
        source.pipe_input(TestRecord("k1", "apple", 10, headers=[("trace", b"t-1")]))
        source.pipe_input(TestRecord("k2", "avocado", 20, headers=[("trace", b"t-2"), ("trace", b"t-3")]))
        source.pipe_input(TestRecord("k3", "banana", 30))

        upper = driver.create_output_topic("upper").read_records_to_list()
        counts = driver.create_output_topic("per-letter").read_records_to_list()

    assert [(r.value, r.headers) for r in upper] == [
        ("APPLE", (("trace", b"t-1"),)),
        ("AVOCADO", (("trace", b"t-2"), ("trace", b"t-3"))),
        ("BANANA", ()),
    ]
    assert [(r.key, r.value, r.headers) for r in counts] == [
        ("a", 1, (("trace", b"t-1"),)),
        ("a", 2, (("trace", b"t-2"), ("trace", b"t-3"))),
        ("b", 1, ()),
    ]


def test_a_suppressed_window_result_carries_the_headers_of_the_last_update_not_of_the_record_closing_it() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", key_serde="string", value_serde="string", name="clicks")
        .group_by_key(name="by-user")
        .windowed_by(TimeWindows.of_size_with_no_grace(5_000))
        .count(name="per-window", store="per-window-store")
        .suppress(Suppressed.until_window_closes().with_name("final"))
        .to_stream(name="finals")
        .to("finals", name="out", value_serde="long")
    )
    with TopologyTestDriver(builder) as driver:
        clicks = driver.create_input_topic("clicks")
        clicks.pipe_input(TestRecord("u", "x", 1_000, headers=[("seq", b"1")]))
        clicks.pipe_input(TestRecord("u", "x", 3_000, headers=[("seq", b"2")]))
        clicks.pipe_input(TestRecord("other", "x", 6_000, headers=[("seq", b"3")]))  # closes [0, 5 s)

        finals = driver.create_output_topic("finals", key_serde="windowed:string:5000").read_records_to_list()

    assert [(r.key.key, r.value, r.headers) for r in finals] == [("u", 2, (("seq", b"2"),))]


class Tagging(Processor):
    """Forwards each record with a ``seen-by`` header added; every 10 ms of stream time forwards a tick."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        context.schedule(10, PunctuationType.STREAM_TIME, self.tick)

    def process(self, record: Record) -> None:
        self.context.forward(record.with_headers([*record.headers, ("seen-by", b"tagging")]))

    def tick(self, timestamp: int) -> None:
        self.context.forward("tick", "tick")


def test_a_processor_sees_the_input_headers_replaces_them_downstream_and_punctuates_without_them() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde="string", value_serde="string", name="in")
        .process(Tagging, name="tagging")
        .to("out", name="out")
    )
    with TopologyTestDriver(builder) as driver:
        driver.create_input_topic("in").pipe_input(TestRecord("k", "v", 12, headers=[("trace", b"t")]))

        out = driver.create_output_topic("out").read_records_to_list()

    assert [(r.key, r.headers) for r in out] == [
        ("k", (("trace", b"t"), ("seen-by", b"tagging"))),
        ("tick", ()),  # the punctuation at stream time 12 runs after the record, with no input headers
    ]
