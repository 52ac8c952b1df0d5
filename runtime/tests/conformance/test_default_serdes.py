"""Default serdes on every engine: a topology that names no serde reads, groups, stores and writes with the
config's ``default.key.serde`` / ``default.value.serde`` (Kafka Streams' ``StreamsConfig`` defaults)."""

from __future__ import annotations

from streamapp import StreamsBuilder

from conformance import dsl_functions as fn
from conformance.harness import Engine


def test_sources_repartitions_stores_and_sinks_without_serdes_use_the_config_defaults(engine: Engine) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("words", name="words")
        .select_key(fn.first_letter, name="by-letter")
        .group_by_key(name="letters")
        .count(name="count", store="letter-counts")
        .to_stream(name="changes")
        .to("letter-counts", value_serde="long", name="out")
    )
    config = {"default.key.serde": "string", "default.value.serde": "json"}
    inputs = [("words", word, {"word": word}, 1_000 + i) for i, word in enumerate(["apple", "avocado", "banana"])]

    out = engine.run(builder, inputs, ["letter-counts", "{application_id}-letters-repartition"], config)

    assert out["letter-counts"] == [("a", 1, 1_000), ("a", 2, 1_001), ("b", 1, 1_002)]
    assert [(k, v) for k, v, _ in out["{application_id}-letters-repartition"]] == [
        ("a", {"word": "apple"}),
        ("a", {"word": "avocado"}),
        ("b", {"word": "banana"}),
    ]
