"""Kafka security settings of a replay: one set of librdkafka keys for both of its Kafka clients.

The replay reads through Spark's Kafka connector (the Java client: options ``kafka.<key>``) and writes through
the runtime's producer (librdkafka). A plan's ``kafka`` settings, and the ``STREAMAPP_KAFKA_*`` variables
``streamapp run`` reads too (``streamapp.config.security_from_environment``: a secret mounted into the replay's
pod never enters the plan), use librdkafka's keys; ``java_client_options`` translates them for the connector:

===========================================  ==========================================================
librdkafka                                   Java client (Spark option ``kafka.<key>``)
===========================================  ==========================================================
``security.protocol``                        the same (``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``)
``sasl.mechanism`` / ``sasl.mechanisms``     ``sasl.mechanism`` (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``)
``sasl.username`` + ``sasl.password``        ``sasl.jaas.config`` (``PlainLoginModule`` / ``ScramLoginModule``)
``ssl.ca.location`` (a PEM file)             ``ssl.truststore.location`` + ``ssl.truststore.type=PEM``
``ssl.endpoint.identification.algorithm``    the same; ``none`` is the Java client's empty string
===========================================  ==========================================================

Any other ``security.``, ``sasl.`` or ``ssl.`` key (client certificates, OAUTHBEARER, Kerberos) has no
translation here and is refused with ``ValueError`` naming the key, before any job starts; other keys pass as
they are. Spark redacts ``sasl.jaas.config`` in its logs (``KafkaRedactionUtil``).
"""

from __future__ import annotations

from collections.abc import Mapping

from streamapp.config import security_from_environment

__all__ = ["client_settings", "java_client_options"]

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")
_TRANSLATED = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.endpoint.identification.algorithm",
    }
)


def client_settings(plan_settings: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings of the replay's clients: the plan's, overridden by ``STREAMAPP_KAFKA_*`` variables
    of ``environ``. Raises ConfigError naming a ``*_FILE`` variable whose file cannot be read."""
    return {**plan_settings, **security_from_environment(environ)}


def java_client_options(settings: Mapping[str, str]) -> dict[str, str]:
    """The Java client's keys for librdkafka ``settings`` (module docstring; without the ``kafka.`` prefix).

    Raises ValueError naming a security key without a translation, or SASL without username, password or a
    known mechanism.
    """
    options: dict[str, str] = {}
    for key, value in settings.items():
        if key in _TRANSLATED:
            continue
        if key.startswith(_SECURITY_PREFIXES):
            raise ValueError(
                f"replay: Kafka setting '{key}' has no translation for Spark's Kafka connector (supported: "
                f"{', '.join(sorted(_TRANSLATED))})"
            )
        options[key] = value
    protocol = settings.get("security.protocol")
    if protocol is not None:
        options["security.protocol"] = protocol.upper()
    mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
    if protocol is not None and protocol.upper().startswith("SASL"):
        mechanism = (mechanism or "PLAIN").upper()
        module = _LOGIN_MODULES.get(mechanism)
        username, password = settings.get("sasl.username"), settings.get("sasl.password")
        if module is None or username is None or password is None:
            raise ValueError(
                f"replay: SASL needs sasl.username, sasl.password and a mechanism of {', '.join(_LOGIN_MODULES)} "
                f"(got mechanism {mechanism!r})"
            )
        options["sasl.mechanism"] = mechanism
        options["sasl.jaas.config"] = (
            f'{module} required username="{_quoted(username)}" password="{_quoted(password)}";'
        )
    if "ssl.ca.location" in settings:
        options["ssl.truststore.location"] = settings["ssl.ca.location"]
        options["ssl.truststore.type"] = "PEM"
    algorithm = settings.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        options["ssl.endpoint.identification.algorithm"] = "" if algorithm.lower() == "none" else algorithm
    return options


def _quoted(text: str) -> str:
    """``text`` inside a JAAS double-quoted string (backslash and quote escaped)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
