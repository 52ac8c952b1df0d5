"""StreamsBuilder: the DSL's entry point; records steps and builds a TopologyDescription.

Building executes no user code and touches no cluster. User functions are kept as given (callables or
``"module:attr"`` strings) and turned into references by ``build()``. Lambdas, nested functions and functions
defined in ``__main__`` are welcome: the description keeps them (``TopologyDescription.in_process_functions``)
for a run in this process (the TopologyTestDriver); only exporting the description (``to_yaml``, ``streamapp
topology export``) needs importable references, and says which node and parameter has none.

Default names follow Kafka Streams (``KSTREAM-FILTER-0000000001``: a prefix plus a builder-wide counter),
so they are deterministic but shift when steps are inserted. Names derive internal topic and state folder
names, so pass ``name=`` (and ``store=``) for every stateful step of a production topology.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from streamapp.topology import NODE_TYPES, TopologyDescription, TopologyError, function_reference
from streamapp.topology.functions import InProcessFunction, describe_function
from streamapp.topology.names import check_name
from streamapp.topology.timestamps import TimestampExtractorSpec

if TYPE_CHECKING:
    from streamapp.dsl.joins import GlobalKTable
    from streamapp.dsl.streams import KStream
    from streamapp.dsl.tables import KTable

UserFunction = Callable[..., Any] | str
"""A function (a lambda too, see the module docstring), or a ``"module:attr"`` reference."""


TimestampExtractorArg = TimestampExtractorSpec | Mapping[str, Any]
"""A source's timestamp extractor: the model, or its fields as a dict (a ``function`` may be a callable)."""


def _extractor_dict(spec: TimestampExtractorArg | None) -> dict[str, Any] | None:
    """The document form of a timestamp extractor; raises TopologyError when it is invalid."""
    if spec is None:
        return None
    if not isinstance(spec, TimestampExtractorSpec):
        fields = dict(spec)
        if callable(fields.get("function")):
            fields["function"] = function_reference(fields["function"])
        try:
            spec = TimestampExtractorSpec.model_validate(fields)
        except ValidationError as exc:
            raise TopologyError(f"timestamp_extractor: {exc.errors()[0]['msg']}") from None
    return spec.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True, mode="json") or {"type": "record"}


@dataclass
class _Step:
    """One node as recorded by the DSL: snake_case parameters, functions possibly still callables."""

    type: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)


class StreamsBuilder:
    """Builds a topology description from DSL calls.

    >>> builder = StreamsBuilder()
    >>> builder.stream("in", key_serde="string", value_serde="json", name="in").to("out", name="out")
    >>> [node.type for node in builder.build().nodes]
    ['source', 'sink']
    """

    def __init__(self) -> None:
        self._steps: list[_Step] = []
        self._stores: list[dict[str, Any]] = []
        self._index = 0

    def stream(
        self,
        topics: str | Sequence[str],
        *,
        key_serde: str = "bytes",
        value_serde: str = "bytes",
        name: str | None = None,
        timestamp_extractor: TimestampExtractorArg | None = None,
    ) -> KStream:
        """A KStream of the records of one or more topics (Kafka Streams' ``StreamsBuilder.stream``).

        ``timestamp_extractor``: where each record's event time comes from, a ``TimestampExtractorSpec`` or its
        fields as a dict (``{"type": "field", "field": "ts"}``, ``{"type": "custom", "function": fn}``; see
        ``streamapp.topology.timestamps``); default the record timestamp.
        """
        from streamapp.dsl.streams import KStream

        topic_list = [topics] if isinstance(topics, str) else list(topics)
        node = self._add(
            "source",
            name,
            "KSTREAM-SOURCE-",
            topics=topic_list,
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp_extractor=_extractor_dict(timestamp_extractor),
        )
        return KStream(self, node, key_serde=key_serde, value_serde=value_serde, key_changed=False)

    def global_table(
        self,
        topic: str,
        *,
        store: str | None = None,
        key_serde: str = "bytes",
        value_serde: str = "bytes",
        name: str | None = None,
    ) -> GlobalKTable:
        """A GlobalKTable of every partition of ``topic`` (Kafka's ``StreamsBuilder.globalTable``); see
        ``streamapp.dsl.joins.global_table``. Only a KStream can join it."""
        from streamapp.dsl.joins import global_table

        return global_table(self, topic, store=store, key_serde=key_serde, value_serde=value_serde, name=name)

    def table(
        self,
        topic: str,
        *,
        store: str | None = None,
        key_serde: str = "bytes",
        value_serde: str = "bytes",
        name: str | None = None,
        timestamp_extractor: TimestampExtractorArg | None = None,
    ) -> KTable:
        """A KTable of ``topic`` (Kafka's ``StreamsBuilder.table``), materialized in key-value store ``store``
        (default ``<name>-store``, else Kafka's ``<topic>-STATE-STORE-<n>``) with its own changelog topic.

        The latest value per key; a null value (tombstone) deletes the key; null keys are dropped.
        ``timestamp_extractor`` as for ``stream``.
        """
        from streamapp.dsl.tables import KTable

        node_name = name if name is not None else self._new_name("KTABLE-SOURCE-")
        store_name = store or (f"{name}-store" if name is not None else self._new_name(f"{topic}-STATE-STORE-"))
        self._claim(node_name)
        self._add_store(store_name, key_serde, value_serde)
        self._add(
            "table",
            node_name,
            "",
            topics=[topic],
            store=store_name,
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp_extractor=_extractor_dict(timestamp_extractor),
        )
        return KTable(self, node_name, key_serde=key_serde, value_serde=value_serde)

    def add_state_store(self, name: str, *, key_serde: str = "bytes", value_serde: str = "bytes") -> None:
        """Declare a key-value store for Processor API nodes (Kafka's ``addStateStore``); connect it with
        ``stream.process(..., stores=[name])``. Its changelog is ``<applicationId>-<name>-changelog``."""
        self._add_store(name, key_serde, value_serde)

    def build(self) -> TopologyDescription:
        """The validated TopologyDescription of everything built so far; raises TopologyError."""
        in_process: dict[str, dict[str, InProcessFunction]] = {}
        nodes = [self._export(step, in_process.setdefault(step.name, {})) for step in self._steps]
        description = TopologyDescription.from_dict({"nodes": nodes, "stores": list(self._stores)})
        return description.with_in_process_functions(in_process) if any(in_process.values()) else description

    # -- used by KStream / KGroupedStream / KTable ---------------------------------------------------

    def _add(self, node_type: str, name: str | None, prefix: str, **params: Any) -> str:
        """Record a node; returns its name (``name`` or the next Kafka-style default)."""
        node_name = name if name is not None else self._new_name(prefix)
        if node_type not in NODE_TYPES:
            raise TopologyError(
                f"node '{node_name}': unknown type '{node_type}'; allowed types: {', '.join(NODE_TYPES)}"
            )
        self._claim(node_name)
        self._steps.append(_Step(type=node_type, name=node_name, params=params))
        return node_name

    def _add_store(self, name: str, key_serde: str, value_serde: str) -> None:
        check_name("store", name)
        if any(store["name"] == name for store in self._stores):
            raise TopologyError(f"store '{name}': store name is already used in this topology")
        self._stores.append({"name": name, "type": "key_value", "key_serde": key_serde, "value_serde": value_serde})

    def _new_name(self, prefix: str) -> str:
        name = f"{prefix}{self._index:010d}"
        self._index += 1
        return name

    def _claim(self, name: str) -> None:
        check_name("node", name)
        if any(step.name == name for step in self._steps):
            raise TopologyError(f"node '{name}': node name is already used in this topology")

    @staticmethod
    def _export(step: _Step, in_process: dict[str, InProcessFunction]) -> dict[str, Any]:
        """The document form of a step: its user functions (the node type's ``function_params``) as references;
        the functions another process could not import by theirs go to ``in_process`` too."""
        params = dict(step.params)
        for key in NODE_TYPES[step.type].function_params:
            function = params.get(key)
            if function is not None:
                try:
                    params[key], reason = describe_function(function)
                except TopologyError as exc:
                    raise TopologyError(f"node '{step.name}': {key}: {exc}") from exc
                if reason is not None:
                    in_process[key] = InProcessFunction(function, reason)
        return {"name": step.name, "type": step.type, **{k: v for k, v in params.items() if v is not None}}
