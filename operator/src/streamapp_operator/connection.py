"""How both Kinds reach the app's Kafka cluster: the typed ``spec.kafka`` (bootstrap servers, SASL, TLS), the
non-secret client settings the pods get, the environment that hands them the credentials from their Secret,
and the operator's own connection with the credentials read through the Kubernetes seam.

A StreamReplay connects to the Kafka of the StreamApp it replays, so both Kinds use this one module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from pydantic import ConfigDict, Field, model_validator

from streamapp_operator.kinds import SpecModel
from streamapp_operator.outcomes import Problem


class SaslMechanism(StrEnum):
    """SASL mechanisms of ``spec.kafka.authentication``."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class SecretKeyRef(SpecModel):
    """A key of a Secret in the StreamApp's namespace."""

    name: str = Field(min_length=1, description="Name of the Secret (same namespace as the StreamApp).")
    key: str = Field(min_length=1, description="Key in the Secret's data.")


_ONE_USERNAME = "set either username or usernameSecret"


class KafkaAuthentication(SpecModel):
    """SASL authentication of the pods and of the operator's admin client; the credentials stay in a Secret
    (mounted into the pods as environment variables, read by the operator; never copied)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "has(self.username) != has(self.usernameSecret)", "message": _ONE_USERNAME}
            ]
        }
    )

    mechanism: SaslMechanism = Field(description="SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.")
    username: str | None = Field(default=None, min_length=1, description="SASL user name (not secret).")
    username_secret: SecretKeyRef | None = Field(default=None, description="SASL user name from a Secret.")
    password_secret: SecretKeyRef = Field(description="SASL password from a Secret.")

    @model_validator(mode="after")
    def _one_username(self) -> KafkaAuthentication:
        if (self.username is None) == (self.username_secret is None):
            raise ValueError(_ONE_USERNAME)
        return self


class KafkaTls(SpecModel):
    """TLS to the brokers, verified against a CA certificate from a Secret."""

    ca_secret: SecretKeyRef | None = Field(
        default=None, description="PEM CA certificate(s) from a Secret; the system CAs when unset."
    )


class KafkaSpec(SpecModel):
    """How the application reaches its Kafka cluster."""

    bootstrap_servers: str = Field(
        min_length=1,
        description="Kafka bootstrap.servers: comma-separated host:port list, used by the pods and the operator.",
    )
    authentication: KafkaAuthentication | None = Field(
        default=None, description="SASL authentication with credentials from a Secret."
    )
    tls: KafkaTls | None = Field(default=None, description="TLS to the brokers (SSL or SASL_SSL).")

    def security_protocol(self) -> str:
        """librdkafka's ``security.protocol`` implied by authentication and TLS."""
        sasl, tls = self.authentication is not None, self.tls is not None
        return {(False, False): "PLAINTEXT", (True, False): "SASL_PLAINTEXT", (False, True): "SSL"}.get(
            (sasl, tls), "SASL_SSL"
        )


CA_DIR = "/etc/streamapp/kafka-ca"

CA_FILE = "ca.crt"

SASL_USERNAME_ENV = "STREAMAPP_KAFKA_SASL_USERNAME"

SASL_PASSWORD_ENV = "STREAMAPP_KAFKA_SASL_PASSWORD"

#: The runtime's own key prefixes for one kind of client (``streamapp.config``); a security key set there
#: would override the one the operator derives.
_CLIENTS = ("consumer", "producer")

#: Connection security keys the operator derives from ``spec.kafka.authentication`` and ``spec.kafka.tls``.
SECURITY_CONFIG_KEYS = tuple(
    f"{prefix}{key}"
    for prefix in ("", *(f"{client}." for client in _CLIENTS))
    for key in ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "ssl.ca.location")
)


def security_config(kafka: KafkaSpec) -> dict[str, str]:
    """The non-secret connection settings of every Kafka client of the runtime (top-level
    ``security.protocol``, ``sasl.mechanism``, ``ssl.ca.location``: ``streamapp.config`` hands them to all
    its clients); the credentials themselves reach the pods from the Secret (``credentials_env``), never here."""
    if kafka.authentication is None and kafka.tls is None:
        return {}
    settings = {"security.protocol": kafka.security_protocol()}
    if kafka.authentication is not None:
        settings["sasl.mechanism"] = kafka.authentication.mechanism.value
    if kafka.tls is not None and kafka.tls.ca_secret is not None:
        settings["ssl.ca.location"] = f"{CA_DIR}/{CA_FILE}"
    return settings


def credentials_env(kafka: KafkaSpec) -> list[dict[str, Any]]:
    """The environment variables that hand the SASL credentials from their Secret to the runtime
    (``streamapp.config.SECURITY_ENV``: ``STREAMAPP_KAFKA_SASL_USERNAME``/``_PASSWORD`` -> ``sasl.username``/
    ``sasl.password`` of every client): the kubelet reads the Secret, so the values never appear in a
    ConfigMap, the pod spec, the process arguments or the StreamApp."""
    auth = kafka.authentication
    if auth is None:
        return []
    if auth.username_secret is not None:
        username = _secret_env(SASL_USERNAME_ENV, auth.username_secret)
    else:
        username = {"name": SASL_USERNAME_ENV, "value": str(auth.username)}
    return [username, _secret_env(SASL_PASSWORD_ENV, auth.password_secret)]


def _secret_env(name: str, ref: SecretKeyRef) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}


SECRET_MISSING = "SecretMissing"

SECRET_KEY_MISSING = "SecretKeyMissing"


class SecretReader(Protocol):
    """The one call of the Kubernetes seam (``k8s.Cluster``) a connection needs."""

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """The Secret's decoded ``data`` (``key -> text``), or None when it does not exist."""
        ...


@dataclass(frozen=True)
class KafkaConnection:
    """How the operator reaches one Kafka cluster: the bootstrap servers and librdkafka security settings
    (``security.protocol``, ``sasl.*``, ``ssl.*``; a password among them comes from a Secret and is never
    logged nor shown: ``repr`` leaves the settings out)."""

    bootstrap_servers: str
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def settings(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap_servers, **dict(self.security)}


def kafka_connection(cluster: SecretReader, namespace: str, kafka: KafkaSpec) -> tuple[KafkaConnection, list[Problem]]:
    """The operator's own connection to the app's Kafka: the same security settings as the pods, with the
    credentials read from their Secrets (through the seam; never logged, never in status).

    A Secret that does not exist (``SecretMissing``), or a key it lacks or holds empty (``SecretKeyMissing``),
    is a problem naming the field, the Secret and the key: the caller reports it and builds no Kafka client
    (librdkafka refuses an empty SASL password at construction)."""
    security = security_config(kafka)
    problems: list[Problem] = []

    def secret(ref: SecretKeyRef | None, field: str) -> str | None:
        if ref is None:
            return None
        data = cluster.read_secret(namespace, ref.name)
        problem = secret_problem(data, ref, field)
        if problem is not None:
            problems.append(problem)
            return None
        return (data or {})[ref.key]

    auth = kafka.authentication
    if auth is not None:
        username = auth.username or secret(auth.username_secret, "spec.kafka.authentication.usernameSecret")
        password = secret(auth.password_secret, "spec.kafka.authentication.passwordSecret")
        security.update({"sasl.username": username or "", "sasl.password": password or ""})
    if kafka.tls is not None and kafka.tls.ca_secret is not None:
        security.pop("ssl.ca.location", None)
        ca = secret(kafka.tls.ca_secret, "spec.kafka.tls.caSecret")
        if ca is not None:
            security["ssl.ca.pem"] = ca
    return KafkaConnection(kafka.bootstrap_servers, tuple(sorted(security.items()))), problems


def secret_problem(data: dict[str, str] | None, ref: SecretKeyRef, field: str) -> Problem | None:
    """Why Secret ``ref.name`` (its decoded ``data``; None: it does not exist) cannot give ``ref.key`` for ``field``,
    or None. Names the Secret, the key and the keys it has, never a value."""
    if data is None:
        return Problem(SECRET_MISSING, f"{field}: Secret {ref.name} does not exist")
    if ref.key not in data:
        keys = ", ".join(sorted(data)) or "none"
        return Problem(SECRET_KEY_MISSING, f"{field}: Secret {ref.name} has no key {ref.key!r} (its keys: {keys})")
    if not data[ref.key].strip():
        return Problem(SECRET_KEY_MISSING, f"{field}: key {ref.key!r} of Secret {ref.name} is empty")
    return None
