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

from streamapp.dsl.repartitions import null_key_repartitions
from streamapp.topology import NODE_TYPES, TopologyDescription, TopologyError, function_reference
from streamapp.topology.document import check_serde
from streamapp.topology.functions import InProcessFunction, describe_function
from streamapp.topology.names import check_name
from streamapp.topology.timestamps import TimestampExtractorSpec

if TYPE_CHECKING:
    from streamapp.dsl.joins import GlobalKTable
    from streamapp.dsl.streams import KStream
    from streamapp.dsl.tables import KTable

DEFAULT_KEY_SERDE = "<default.key.serde>"
"""The key serde of a source, table, global table or store that names none, and so of the sinks, repartitions and
stores downstream that name none: ``default.key.serde`` of the config ``build`` gets (else the builder's, else
``bytes``), as Kafka Streams takes a serde missing from the topology from ``StreamsConfig``."""
DEFAULT_VALUE_SERDE = "<default.value.serde>"
"""The same for values: ``default.value.serde``."""
_DEFAULT_SERDE_KEYS = {DEFAULT_KEY_SERDE: "default.key.serde", DEFAULT_VALUE_SERDE: "default.value.serde"}

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

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        """``config``: the topology's config (Kafka's ``TopologyConfig``); only ``default.key.serde`` and
        ``default.value.serde`` are read, as defaults of ``build``."""
        self._steps: list[_Step] = []
        self._stores: list[dict[str, Any]] = []
        self._index = 0
        self._default_serdes = _default_serdes(config or {}, {})

    def stream(
        self,
        topics: str | Sequence[str],
        *,
        key_serde: str = DEFAULT_KEY_SERDE,
        value_serde: str = DEFAULT_VALUE_SERDE,
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
        key_serde: str = DEFAULT_KEY_SERDE,
        value_serde: str = DEFAULT_VALUE_SERDE,
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
        key_serde: str = DEFAULT_KEY_SERDE,
        value_serde: str = DEFAULT_VALUE_SERDE,
        name: str | None = None,
        timestamp_extractor: TimestampExtractorArg | None = None,
        history_retention_ms: int | None = None,
    ) -> KTable:
        """A KTable of ``topic`` (Kafka's ``StreamsBuilder.table``), materialized in key-value store ``store``
        (default ``<name>-store``, else Kafka's ``<topic>-STATE-STORE-<n>``) with its own changelog topic.

        The latest value per key; a null value (tombstone) deletes the key; null keys are dropped.
        ``timestamp_extractor`` as for ``stream``.

        ``history_retention_ms`` (ms, >= 0) makes it a **versioned table** (Kafka's ``Materialized.as(
        Stores.persistentVersionedKeyValueStore(store, historyRetention))``, KIP-889/914): ``store`` is a
        ``versioned`` store keeping every value within the retention by timestamp, so a stream-table join reads
        the value as of each stream record's timestamp and may wait ``grace_ms`` for late table updates
        (``KStream.join``). A versioned table feeds only ``to_stream`` and stream-table joins
        (``streamapp.topology.nodes.io.TableSourceNode``).
        """
        from streamapp.dsl.tables import KTable

        node_name = name if name is not None else self._new_name("KTABLE-SOURCE-")
        store_name = store or (f"{name}-store" if name is not None else self._new_name(f"{topic}-STATE-STORE-"))
        self._claim(node_name)
        if history_retention_ms is None:
            self._add_store(store_name, key_serde, value_serde)
        else:
            self._add_store(
                store_name, key_serde, value_serde, type="versioned", history_retention_ms=history_retention_ms
            )
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
        table = KTable(self, node_name, key_serde=key_serde, value_serde=value_serde)
        table.history_retention_ms = history_retention_ms
        return table

    def add_state_store(
        self, name: str, *, key_serde: str = DEFAULT_KEY_SERDE, value_serde: str = DEFAULT_VALUE_SERDE
    ) -> None:
        """Declare a key-value store for Processor API nodes (Kafka's ``addStateStore``); connect it with
        ``stream.process(..., stores=[name])``. Its changelog is ``<applicationId>-<name>-changelog``."""
        self._add_store(name, key_serde, value_serde)

    def build(self, config: Mapping[str, Any] | None = None) -> TopologyDescription:
        """The validated TopologyDescription of everything built so far; raises TopologyError.

        Serdes nobody named (``DEFAULT_KEY_SERDE``, ``DEFAULT_VALUE_SERDE``) become ``default.key.serde`` /
        ``default.value.serde`` of ``config`` (Kafka's ``build(props)``), else of the builder's config, else
        ``bytes``. The TopologyTestDriver builds a builder with its own config. Repartitions drop null keys
        by Kafka's rule (``streamapp.dsl.repartitions``), decided here as Kafka decides it when it builds."""
        defaults = _default_serdes(config or {}, self._default_serdes)
        in_process: dict[str, dict[str, InProcessFunction]] = {}
        dropping = null_key_repartitions((step.name, step.type, step.params) for step in self._steps)
        nodes = [
            _with_serdes(self._export(step, in_process.setdefault(step.name, {}), step.name in dropping), defaults)
            for step in self._steps
        ]
        stores = [_with_serdes(store, defaults) for store in self._stores]
        description = TopologyDescription.from_dict({"nodes": nodes, "stores": stores})
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

    def _add_repartition(self, name: str, upstream: str, key_serde: str, value_serde: str) -> str:
        """Record a ``repartition`` node ``name`` (topic ``<applicationId>-<name>-repartition``) reading ``upstream``,
        as the DSL puts one in front of a grouping or a join whose key changed; returns its name."""
        return self._add(
            "repartition", name, "KSTREAM-REPARTITION-", input=upstream, key_serde=key_serde, value_serde=value_serde
        )

    def _add_store(self, name: str, key_serde: str, value_serde: str, **spec: Any) -> None:
        """Declare store ``name`` (``spec``: more ``StoreSpec`` fields, e.g. ``type``, snake_case)."""
        check_name("store", name)
        if any(store["name"] == name for store in self._stores):
            raise TopologyError(f"store '{name}': store name is already used in this topology")
        self._stores.append(
            {"name": name, "type": "key_value", "key_serde": key_serde, "value_serde": value_serde, **spec}
        )

    def _new_name(self, prefix: str) -> str:
        name = f"{prefix}{self._index:010d}"
        self._index += 1
        return name

    def _claim(self, name: str) -> None:
        check_name("node", name)
        if any(step.name == name for step in self._steps):
            raise TopologyError(f"node '{name}': node name is already used in this topology")

    @staticmethod
    def _export(step: _Step, in_process: dict[str, InProcessFunction], drop_null_keys: bool) -> dict[str, Any]:
        """The document form of a step: its user functions (the node type's ``function_params``) as references;
        the functions another process could not import by theirs go to ``in_process`` too. ``drop_null_keys``:
        a repartition that drops null keys (``streamapp.dsl.repartitions``)."""
        params = dict(step.params)
        if drop_null_keys:
            params["drop_null_keys"] = True
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


def _default_serdes(config: Mapping[str, Any], fallback: Mapping[str, str]) -> dict[str, str]:
    """``{sentinel: serde name}`` from ``config``'s default serde keys, else ``fallback``, else ``bytes``; raises
    TopologyError for an unknown serde name."""
    defaults: dict[str, str] = {}
    for sentinel, key in _DEFAULT_SERDE_KEYS.items():
        name = config.get(key, fallback.get(sentinel, "bytes"))
        try:
            defaults[sentinel] = check_serde(name) if isinstance(name, str) else check_serde(str(name))
        except ValueError as exc:
            raise TopologyError(f"{key}: {exc}") from None
    return defaults


def _with_serdes(document: dict[str, Any], defaults: Mapping[str, str]) -> dict[str, Any]:
    """``document`` with the default-serde sentinels in its serde fields (also inside ``windowed:<key serde>``)
    replaced by ``defaults``."""
    resolved = dict(document)
    for field_name in ("key_serde", "value_serde", "foreign_key_serde", "right_value_serde"):
        value = resolved.get(field_name)
        if isinstance(value, str) and "<default." in value:
            for sentinel, name in defaults.items():
                value = value.replace(sentinel, name)
            resolved[field_name] = value
    return resolved


def with_default_serdes(document: Any, config: Mapping[str, Any]) -> Any:
    """A topology document (camelCase) whose nodes and stores without ``keySerde`` / ``valueSerde`` get
    ``config``'s ``default.key.serde`` / ``default.value.serde`` (default ``bytes``), as a built topology's do;
    raises TopologyError for an unknown default serde name. Anything that is not a document is returned as is,
    for ``TopologyDescription.from_dict`` to refuse."""
    if not isinstance(document, Mapping):
        return document
    defaults = _default_serdes(config, {})
    names = {
        ("keySerde", "key_serde"): defaults[DEFAULT_KEY_SERDE],
        ("valueSerde", "value_serde"): defaults[DEFAULT_VALUE_SERDE],
    }

    def filled(item: Any, has_serdes: bool) -> Any:
        if not has_serdes or not isinstance(item, Mapping):
            return item
        missing = {keys[0]: name for keys, name in names.items() if not any(key in item for key in keys)}
        return {**missing, **item}

    nodes, stores = document.get("nodes"), document.get("stores")
    resolved = dict(document)
    if isinstance(nodes, list):
        resolved["nodes"] = [
            filled(node, isinstance(node, Mapping) and _has_serdes(node.get("type"))) for node in nodes
        ]
    if isinstance(stores, list):
        resolved["stores"] = [filled(store, True) for store in stores]
    return resolved


def _has_serdes(node_type: Any) -> bool:
    node_class = NODE_TYPES.get(node_type) if isinstance(node_type, str) else None
    return node_class is not None and "key_serde" in node_class.model_fields
