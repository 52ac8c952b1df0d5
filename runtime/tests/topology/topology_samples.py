"""Sample topology documents shared by the topology tests (plain data, fresh copies on every call)."""

from __future__ import annotations

import copy
from typing import Any

_FLIGHTS: dict[str, Any] = {
    "nodes": [
        {"name": "flights", "type": "source", "topics": ["flights"], "keySerde": "string", "valueSerde": "json"},
        {"name": "departed", "type": "filter", "input": "flights", "predicate": "flights_app.logic:is_departed"},
        {"name": "per-carrier-key", "type": "select_key", "input": "departed", "mapper": "flights_app.logic:carrier"},
        {
            "name": "per-carrier",
            "type": "repartition",
            "input": "per-carrier-key",
            "keySerde": "string",
            "valueSerde": "json",
        },
        {"name": "count", "type": "count", "input": "per-carrier", "store": "departures-per-carrier-store"},
        {"name": "changes", "type": "to_stream", "input": "count"},
        {
            "name": "out",
            "type": "sink",
            "input": "changes",
            "topic": "departures-per-carrier",
            "keySerde": "string",
            "valueSerde": "long",
        },
    ],
    "stores": [
        {"name": "departures-per-carrier-store", "type": "key_value", "keySerde": "string", "valueSerde": "long"},
    ],
}

FLIGHTS_YAML = """\
nodes:
  - {name: flights, type: source, topics: [flights], keySerde: string, valueSerde: json}
  - {name: departed, type: filter, input: flights, predicate: "flights_app.logic:is_departed"}
  - {name: per-carrier-key, type: select_key, input: departed, mapper: "flights_app.logic:carrier"}
  - {name: per-carrier, type: repartition, input: per-carrier-key, keySerde: string, valueSerde: json}
  - {name: count, type: count, input: per-carrier, store: departures-per-carrier-store}
  - {name: changes, type: to_stream, input: count}
  - {name: out, type: sink, input: changes, topic: departures-per-carrier, keySerde: string, valueSerde: long}
stores:
  - {name: departures-per-carrier-store, type: key_value, keySerde: string, valueSerde: long}
"""


def flights_doc() -> dict[str, Any]:
    """The flights example topology (source -> filter -> select_key -> repartition -> count -> sink)."""
    return copy.deepcopy(_FLIGHTS)


def node_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """The node dict called ``name`` in ``doc`` (to mutate it in a test)."""
    return next(node for node in doc["nodes"] if node["name"] == name)


def two_stage_doc(source_partitions_topics: list[str] | None = None) -> dict[str, Any]:
    """source(topics) -> select_key -> repartition 'rekeyed' -> count 'totals' -> to_stream -> sink 'out'."""
    return {
        "nodes": [
            {
                "name": "in",
                "type": "source",
                "topics": source_partitions_topics or ["a"],
                "keySerde": "string",
                "valueSerde": "json",
            },
            {"name": "rekey", "type": "select_key", "input": "in", "mapper": "flights_app.logic:carrier"},
            {"name": "rekeyed", "type": "repartition", "input": "rekey", "keySerde": "string", "valueSerde": "json"},
            {"name": "totals", "type": "count", "input": "rekeyed", "store": "totals-store"},
            {"name": "changes", "type": "to_stream", "input": "totals"},
            {
                "name": "out",
                "type": "sink",
                "input": "changes",
                "topic": "out",
                "keySerde": "string",
                "valueSerde": "long",
            },
        ],
        "stores": [{"name": "totals-store", "type": "key_value", "keySerde": "string", "valueSerde": "long"}],
    }
