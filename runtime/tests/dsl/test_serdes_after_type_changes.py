"""Serdes after a step that changes the key or value type (docs/adr/0010): the step's own serde, else its input's
(not the config default, a documented deviation from Kafka Streams); a sink's or repartition's serdes win."""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder

S, J, L = "string", "json", "long"
DEFAULTS = {"default.key.serde": "bytes", "default.value.serde": "double"}


def length(value: Any) -> int:
    return len(value)


def pair(left: Any, right: Any) -> list[Any]:
    return [left, right]


def first_letter(key: Any, value: Any) -> str:
    return str(value)[0]


def written(builder: StreamsBuilder) -> dict[str, tuple[str, str]]:
    description = builder.build(DEFAULTS)
    return {n.name: (n.key_serde, n.value_serde) for n in description.nodes if n.type in ("sink", "repartition")}


def test_a_type_changing_step_without_a_serde_keeps_its_inputs_serdes_not_the_config_defaults() -> None:
    builder = StreamsBuilder()
    words = builder.stream("words", key_serde=S, value_serde=S)
    words.map_values(length).to("lengths", name="lengths")
    words.select_key(first_letter).to("by-letter", name="by-letter")
    words.flat_map_values(list).to("letters", name="letters")
    words.join(builder.table("meanings", key_serde=S, value_serde=J), pair).to("joined", name="joined")

    assert written(builder) == {
        "lengths": (S, S),
        "by-letter": (S, S),
        "letters": (S, S),
        "joined": (S, S),
    }


def test_the_steps_own_serde_and_then_the_sinks_and_the_groupings_win() -> None:
    builder = StreamsBuilder()
    words = builder.stream("words", key_serde=S, value_serde=S)
    lengths = words.map_values(length, value_serde=L)
    lengths.to("lengths", name="lengths")
    lengths.to("lengths-as-json", name="as-json", value_serde=J)
    lengths.select_key(first_letter).group_by_key(name="by-letter", value_serde=J).count(name="count")

    assert written(builder) == {"lengths": (S, L), "as-json": (S, J), "by-letter": (S, J)}
