"""Functions where users write them: a topology that runs in this process (the driver) takes lambdas, nested
functions and functions defined in ``__main__``; an engine that runs it in another process (``streamapp run``
on the broker, the Spark replay) needs the description exported, which names the node and parameter whose
function has no importable reference, and why."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from streamapp import StreamsBuilder, TopologyError

from conformance.harness import Engine

S, L = "string", "long"


def test_lambdas_nested_and_main_functions_run_in_process_and_export_names_them(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def is_odd(key: Any, value: int) -> bool:
        return value % 2 == 1

    def plus_one(value: int) -> int:
        return value + 1

    plus_one.__module__, plus_one.__qualname__ = "__main__", "plus_one"
    monkeypatch.setattr(sys.modules["__main__"], "plus_one", plus_one, raising=False)
    builder = StreamsBuilder()
    (
        builder.stream("numbers", key_serde=S, value_serde=L, name="numbers")
        .filter(is_odd, name="odd")
        .map_values(lambda value: value * 10, name="times-ten")
        .map_values(plus_one, name="plus-one")
        .to("out", name="out")
    )
    inputs = [("numbers", f"k{v}", v, 1_000 + v) for v in (1, 2, 3)]

    if engine.name == "driver":
        assert engine.run(builder, inputs, ["out"])["out"] == [("k1", 11, 1_001), ("k3", 31, 1_003)]
        return
    with pytest.raises(TopologyError, match=r"node 'odd': predicate: function .*is_odd .* defined inside another"):
        engine.run(builder, inputs, ["out"])
