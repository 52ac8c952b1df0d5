"""Avro and Protobuf serdes through confluent-kafka's Schema Registry serializers (optional extra).

``configure_registry_serdes(config, description)`` installs, in this process, the binder ``streamapp.serdes``
uses for ``avro`` / ``avro:<module>:<attr>`` / ``protobuf:<module>:<MessageClass>`` names (grammar and value
types: ``streamapp.serdes``, docs/serdes.md). Each binding is a ``RegistrySerde`` for one ``(topic, key|value)``:
Confluent's ``SerializationContext`` of the topic the bytes go to or come from (the changelog topic for store
data, as Kafka Streams does), so subjects follow Confluent's TopicNameStrategy, ``<topic>-key`` /
``<topic>-value``.

Wire format (Confluent's ``KafkaAvroSerializer`` / ``KafkaProtobufSerializer``, written by confluent-kafka's
``AvroSerializer`` / ``ProtobufSerializer``): magic byte ``0``, the schema id as a 4-byte big-endian int, then
the Avro binary encoding, or for Protobuf the message-index array (zig-zag varints; ``[0]`` as the single byte
``0``) and the message bytes.

Config (``streamapp.config``): ``schema.registry.*`` keys without the prefix are the ``SchemaRegistryClient``
conf (``url`` required; ``mock://<scope>`` is confluent-kafka's in-process mock registry, for tests);
``auto.register.schemas`` (default true) and ``use.latest.version`` (default false) are passed to the
serializers as Confluent's serde configs of the same name. Confluent's serializers refuse both at once, so
``use.latest.version=true`` turns auto-registration off. The generic ``avro`` serde has no schema of its own:
it always writes with the subject's latest version.

Errors: ``RegistrySerdeSetupError`` (a TopologyError) when a topology uses these names and the extra is not
installed, ``schema.registry.url`` is missing, or a schema / message class reference does not resolve; a
record that cannot be (de)serialized (wrong magic byte, unknown schema id, bytes not of the schema, registry
unreachable) raises ``SerdeError``, so the deserialization / production exception handlers apply.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from streamapp.config import StreamsConfig
from streamapp.serdes import RegistrySerdeName, Serde, SerdeError, install_registry_serdes, registry_serde_name
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.functions import resolve_reference

__all__ = [
    "EXTRA_HINT",
    "RegistrySerde",
    "RegistrySerdeSetupError",
    "configure_registry_serdes",
    "registry_client",
    "registry_names",
]

EXTRA_HINT = "pip install 'streamapp-runtime[schema-registry]'"
"""What to install for the Schema Registry serdes (named by every 'extra missing' error)."""


class RegistrySerdeSetupError(TopologyError):
    """The topology's Schema Registry serdes cannot be built (extra missing, no URL, bad reference)."""


class RegistrySerde:
    """A Schema Registry serde bound to the key or the value of one topic.

    ``serializer`` / ``deserializer``: confluent-kafka's ``(obj_or_bytes, SerializationContext) -> ...``
    callables; ``context``: the ``SerializationContext(topic, MessageField.KEY | VALUE)`` both are called with.
    ``None`` passes through unchanged. Any failure of the underlying serializer (``SerializationError``,
    ``SchemaRegistryError``, fastavro / protobuf errors) is raised as SerdeError naming the topic.
    """

    def __init__(self, name: str, topic: str, is_key: bool, serializer: Any, deserializer: Any, context: Any) -> None:
        self.name = name
        self.topic = topic
        self.is_key = is_key
        self._serializer = serializer
        self._deserializer = deserializer
        self._context = context

    def _where(self) -> str:
        return f"{self.name} serde ({'key' if self.is_key else 'value'} of topic '{self.topic}')"

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            data: bytes = self._serializer(obj, self._context)
        except Exception as exc:
            raise SerdeError(f"{self._where()}: cannot serialize {type(obj).__name__}: {exc}") from exc
        return data

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self._deserializer(bytes(data), self._context)
        except Exception as exc:
            raise SerdeError(f"{self._where()}: cannot deserialize {len(data)} bytes: {exc}") from exc


def registry_names(description: TopologyDescription) -> set[str]:
    """Every Schema Registry serde name the description uses (node and store ``keySerde`` / ``valueSerde``)."""
    return {name for name in _serde_names(description.to_dict()) if registry_serde_name(name) is not None}


def configure_registry_serdes(config: StreamsConfig, description: TopologyDescription) -> None:
    """Install the Schema Registry serde binder in this process when ``description`` uses such serdes.

    Checks everything that can be checked before the first record: the extra's modules import, the registry
    URL is set, every schema / message class reference resolves and builds its serializers. Creating the client
    does no I/O (confluent-kafka connects on first use). Raises RegistrySerdeSetupError.
    """
    names = registry_names(description)
    if not names:
        return
    binder = _Binder(config)
    for name in sorted(names):
        parsed = registry_serde_name(name)
        assert parsed is not None
        binder.factories(name, parsed)
    install_registry_serdes(binder)


def registry_client(config: StreamsConfig) -> Any:
    """The process's ``SchemaRegistryClient`` for ``config``'s ``schema.registry.*`` settings (the one the serdes
    use; for a ``mock://`` URL, the mock registry they write to). Raises RegistrySerdeSetupError."""
    conf = dict(config.schema_registry)
    if not conf.get("url"):
        raise RegistrySerdeSetupError("Schema Registry serdes need schema.registry.url in the streams config")
    return _client(_import_extra(), conf)


class _Binder:
    """``streamapp.serdes.RegistrySerdeBinder``: caches one RegistrySerde per ``(name, topic, is_key)``."""

    def __init__(self, config: StreamsConfig) -> None:
        self._modules = _import_extra()
        self._client = registry_client(config)
        self._serde_conf = {
            "auto.register.schemas": config.auto_register_schemas and not config.use_latest_version,
            "use.latest.version": config.use_latest_version,
        }
        self._bound: dict[tuple[str, str, bool], Serde] = {}
        self._factories: dict[str, tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, name: str, parsed: RegistrySerdeName, topic: str, is_key: bool) -> Serde:
        with self._lock:
            serde = self._bound.get((name, topic, is_key))
            if serde is None:
                serializer, deserializer = self.factories(name, parsed)
                field = self._modules.MessageField.KEY if is_key else self._modules.MessageField.VALUE
                context = self._modules.SerializationContext(topic, field)
                serde = RegistrySerde(name, topic, is_key, serializer, deserializer, context)
                self._bound[(name, topic, is_key)] = serde
            return serde

    def factories(self, name: str, parsed: RegistrySerdeName) -> tuple[Any, Any]:
        """The (serializer, deserializer) pair of ``name`` (shared by every topic: the subject comes from the
        context of each call). Raises RegistrySerdeSetupError."""
        pair = self._factories.get(name)
        if pair is None:
            try:
                pair = self._build(name, parsed)
            except RegistrySerdeSetupError:
                raise
            except Exception as exc:  # confluent-kafka / fastavro rejecting a schema (JSON, TypeError, parse errors)
                raise RegistrySerdeSetupError(f"serde '{name}': {type(exc).__name__}: {exc}") from exc
            self._factories[name] = pair
        return pair

    def _build(self, name: str, parsed: RegistrySerdeName) -> tuple[Any, Any]:
        m = self._modules
        if parsed.format == "protobuf":
            assert parsed.reference is not None
            message_class = _resolve(name, parsed.reference)
            if not isinstance(message_class, type) or not hasattr(message_class, "DESCRIPTOR"):
                raise RegistrySerdeSetupError(f"serde '{name}': '{parsed.reference}' is not a protobuf message class")
            conf = {**self._serde_conf, "use.deprecated.format": False}
            return (
                m.ProtobufSerializer(message_class, self._client, conf),
                m.ProtobufDeserializer(message_class, {"use.deprecated.format": False}, self._client),
            )
        if parsed.reference is None:  # generic: write with the subject's latest schema, read with the writer's
            conf = {"auto.register.schemas": False, "use.latest.version": True}
            return m.AvroSerializer(self._client, None, conf=conf), m.AvroDeserializer(self._client)
        schema = _avro_schema(name, _resolve(name, parsed.reference))
        return (
            m.AvroSerializer(self._client, schema, conf=dict(self._serde_conf)),
            m.AvroDeserializer(self._client, schema),
        )


class _Extra:
    """The confluent-kafka classes the serdes use (imported only when a topology needs them)."""

    def __init__(self) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        self.SchemaRegistryClient = SchemaRegistryClient
        self.AvroSerializer, self.AvroDeserializer = AvroSerializer, AvroDeserializer
        self.ProtobufSerializer, self.ProtobufDeserializer = ProtobufSerializer, ProtobufDeserializer
        self.MessageField, self.SerializationContext = MessageField, SerializationContext


def _import_extra() -> _Extra:
    try:
        return _Extra()
    except ImportError as exc:
        raise RegistrySerdeSetupError(
            f"Avro/Protobuf serdes need the Schema Registry extra: {EXTRA_HINT} (import failed: {exc})"
        ) from exc


_CLIENTS: dict[tuple[tuple[str, str], ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(modules: _Extra, conf: dict[str, str]) -> Any:
    """One client per distinct conf in the process (its schema caches are shared by every serde; for a
    ``mock://`` URL, every user in the process sees the same mock registry)."""
    key = tuple(sorted(conf.items()))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            try:
                client = modules.SchemaRegistryClient.new_client(conf)
            except (ValueError, TypeError) as exc:
                raise RegistrySerdeSetupError(f"schema.registry.* config: {exc}") from exc
            _CLIENTS[key] = client
        return client


def _resolve(name: str, reference: str) -> Any:
    """The object ``module:attr`` names; RegistrySerdeSetupError saying what failed."""
    try:
        return resolve_reference(reference, f"serde '{name}': reference")
    except TopologyError as exc:
        raise RegistrySerdeSetupError(str(exc)) from exc


def _avro_schema(name: str, schema: Any) -> str:
    """An Avro schema given as a JSON string or a dict (or list: a union), as the JSON string confluent-kafka
    takes."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict | list):
        return json.dumps(schema)
    raise RegistrySerdeSetupError(
        f"serde '{name}': the Avro schema must be a JSON string or a dict, got {type(schema).__name__}"
    )


def _serde_names(document: Any) -> Iterator[str]:
    if isinstance(document, dict):
        for key, value in document.items():
            if key in ("keySerde", "valueSerde") and isinstance(value, str):
                yield value
            else:
                yield from _serde_names(value)
    elif isinstance(document, list):
        for item in document:
            yield from _serde_names(item)
