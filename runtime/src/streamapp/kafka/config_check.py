"""librdkafka settings checked before the application touches the cluster.

``StreamsConfig`` passes ``consumer.*`` and ``producer.*`` keys (and the top-level ``security.*``, ``sasl.*``,
``ssl.*`` keys, which go to every client) to librdkafka unvalidated. librdkafka refuses an unknown key or a bad
value only when a client is created, which in a stream thread is after the internal topics were created, and then
the thread crash-loops with backoff. ``client_config_problems`` creates every client the application would create
(group consumer, restore consumer, producer, admin) once, without brokers (``bootstrap.servers`` left out, so
nothing connects), and reports every key librdkafka refuses under the name the user wrote it with.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streamapp.config import StreamsConfig
from streamapp.kafka.clients import admin_config, consumer_config, producer_config, restore_consumer_config

__all__ = ["client_config_problems"]

_PROPERTY = re.compile(r'configuration property:? "(?P<key>[^"]+)"')
_SHARED_PREFIXES = ("security.", "sasl.", "ssl.")
_QUIET = logging.getLogger(f"{__name__}.throwaway")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False  # "No bootstrap.servers configured" is expected here


def client_config_problems(config: StreamsConfig) -> list[str]:
    """One line per librdkafka setting that a client of ``config`` would refuse, naming the config key
    (``"config key 'consumer.fetch.max.bytez': No such configuration property ..."``); ``[]`` when every
    client can be created. Creates and closes throwaway clients that never connect (no brokers)."""
    clients: list[tuple[str, Callable[[dict[str, Any]], Any], dict[str, Any], Mapping[str, str]]] = [
        ("consumer", confluent_kafka.Consumer, consumer_config(config, 0, None), config.consumer),
        ("consumer", confluent_kafka.Consumer, restore_consumer_config(config, 0, None), config.consumer),
        ("producer", confluent_kafka.Producer, producer_config(config, 0, None), config.producer),
        ("producer", AdminClient, admin_config(config), config.producer),
    ]
    problems: list[str] = []
    for role, create, settings, user_keys in clients:
        for problem in _refused_settings(role, create, settings, user_keys, config):
            if problem not in problems:
                problems.append(problem)
    return problems


def _refused_settings(
    role: str,
    create: Callable[[dict[str, Any]], Any],
    settings: dict[str, Any],
    user_keys: Mapping[str, str],
    config: StreamsConfig,
) -> list[str]:
    """Create the client with ``settings`` until librdkafka accepts them, leaving out each refused user key."""
    remaining = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
    problems: list[str] = []
    for _ in range(len(remaining) + 1):
        try:
            client = create({**remaining, "logger": _QUIET})
        except KafkaException as exc:
            message = exc.args[0].str()
            match = _PROPERTY.search(message)
            key = match.group("key") if match else None
            if key is None or key not in remaining:
                problems.append(f"librdkafka {role}: {message}")
                return problems
            problems.append(f"{_label(role, key, user_keys, config)}: {message}")
            del remaining[key]
            continue
        _close(client)
        return problems
    return problems


def _label(role: str, key: str, user_keys: Mapping[str, str], config: StreamsConfig) -> str:
    """``config key '<key as the user wrote it>'``: a top-level security key reaches every client, a
    ``consumer.*`` / ``producer.*`` key only its own; a setting the user did not write is the runtime's."""
    if key not in user_keys:
        return f"the runtime's {role} setting '{key}'"
    shared = key.startswith(_SHARED_PREFIXES) and config.consumer.get(key) == config.producer.get(key)
    return f"config key '{key if shared else f'{role}.{key}'}'"


def _close(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        close()
