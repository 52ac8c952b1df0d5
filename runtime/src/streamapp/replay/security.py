"""Kafka security settings of a replay: one set of librdkafka keys for both of its Kafka clients.

The replay reads (``streamapp.kafka.range_reader``) and writes (the runtime's transactional producer) with
librdkafka, in Spark's Python workers. A plan's ``kafka`` settings, and the ``STREAMAPP_KAFKA_*`` variables
``streamapp run`` reads too (``streamapp.config.security_from_environment``: a secret mounted into the replay's
pod never enters the plan), are librdkafka's keys, given to both clients as they are: every security setting
librdkafka supports (SASL PLAIN/SCRAM/OAUTHBEARER/GSSAPI, client certificates) works for the replay as for the
streaming app.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamapp.config import security_from_environment

__all__ = ["client_settings"]


def client_settings(plan_settings: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings of the replay's clients: the plan's, overridden by ``STREAMAPP_KAFKA_*`` variables
    of ``environ``. Raises ConfigError naming a ``*_FILE`` variable whose file cannot be read."""
    return {**plan_settings, **security_from_environment(environ)}
