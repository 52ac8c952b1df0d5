"""The scaled-away members' ``LeaveGroup`` reaches secured clusters: over SASL (PLAIN, SCRAM) and TLS, with the
operator's own credentials, and a refused login or a silent broker is a clear error within the timeout.

SASL against the real local broker's SASL_PLAINTEXT listener (SCRAM-SHA-512 and PLAIN, ``hack/stack/kafka.sh``):
a real static member closes (a temporary leave: the broker keeps it) and the operator's admin client, configured
as for an app with ``spec.kafka.authentication``, removes it. The stack has no TLS listener, so TLS is checked
against a one-request coordinator behind Python's ``ssl`` with a certificate made by ``openssl``: the request
goes through when the CA is the app's, and is refused with another CA.
"""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from stack_env import stack_variable
from streamapp_operator.connection import KafkaConnection
from streamapp_operator.kafka import ConfluentKafkaAdmin
from streamapp_operator.kafka_wire import LeaveGroupFailed, WireSecurity, remove_static_members


def _sasl_settings(mechanism: str, password: str | None = None) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": stack_variable("KAFKA_SASL_USERNAME"),
        "sasl.password": password if password is not None else stack_variable("KAFKA_SASL_PASSWORD"),
    }


def _members(admin: AdminClient, group: str) -> set[str]:
    description = admin.describe_consumer_groups([group])[group].result(10)
    return {m.group_instance_id or m.member_id for m in description.members}


@pytest.mark.integration
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_static_member_is_removed_over_sasl_with_the_operators_credentials(mechanism: str) -> None:
    bootstrap = stack_variable("KAFKA_SASL_BOOTSTRAP")
    settings = _sasl_settings(mechanism)
    group = topic = f"operator-test-sasl-leave-{uuid.uuid4().hex[:8]}"
    client = AdminClient({"bootstrap.servers": bootstrap, **settings})
    client.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, **settings, "group.id": group,
                         "group.protocol": "consumer", "group.instance.id": "app-1-0"})  # fmt: skip
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not consumer.assignment():
            consumer.poll(0.2)
        assert consumer.assignment()
        consumer.close()  # a static member's close is a temporary leave: the broker keeps it
        assert _members(client, group) == {"app-1-0"}
        connection = KafkaConnection(bootstrap, tuple(sorted(settings.items())))
        removed = ConfluentKafkaAdmin(connection).remove_static_members(group, ["app-1-0", "app-7-0"])
        assert removed == ["app-1-0"]
        assert _members(client, group) == set()
    finally:
        client.delete_topics([topic])


@pytest.mark.integration
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_a_wrong_password_is_a_clear_error_naming_the_user_not_the_password(mechanism: str) -> None:
    host, _, port = stack_variable("KAFKA_SASL_BOOTSTRAP").rpartition(":")
    security = WireSecurity.from_settings(_sasl_settings(mechanism, password="not-the-password"))
    with pytest.raises(LeaveGroupFailed, match="SASL authentication of user 'admin'") as failure:
        remove_static_members((host, int(port)), "any-group", ["app-1-0"], timeout=10, security=security)
    assert "not-the-password" not in str(failure.value)


def test_a_broker_that_never_answers_fails_at_the_timeout_instead_of_hanging() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections (backlog), never answers
        port = silent.getsockname()[1]
        with pytest.raises(LeaveGroupFailed, match="timed out"):
            remove_static_members(("127.0.0.1", port), "g", ["app-1-0"], timeout=0.5)


def test_only_the_mechanisms_and_protocols_spoken_are_accepted() -> None:
    with pytest.raises(LeaveGroupFailed, match="SASL mechanism GSSAPI is not supported"):
        WireSecurity.from_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})
    security = WireSecurity.from_settings({"security.protocol": "ssl", "ssl.endpoint.identification.algorithm": "none"})
    assert (security.tls, security.sasl, security.check_hostname) == (True, False, False)
    assert "secret" not in repr(WireSecurity(password="secret", ca_pem="secret"))


# -- TLS ------------------------------------------------------------------------------------------------------


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _certificate_authority(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN={name}")  # fmt: skip
    return key, cert


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, a server certificate it signed for 127.0.0.1, and another CA."""
    directory = tmp_path_factory.mktemp("tls")
    ca_key, ca_cert = _certificate_authority(directory, "app-ca")
    _, other_cert = _certificate_authority(directory, "other-ca")
    key, csr, cert, ext = (directory / f"broker.{s}" for s in ("key", "csr", "crt", "ext"))
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
             "-out", str(csr), "-subj", "/CN=127.0.0.1")  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", str(cert), "-days", "1", "-extfile", str(ext))  # fmt: skip
    return {"ca": ca_cert, "other_ca": other_cert, "cert": cert, "key": key}


def _exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size and (chunk := connection.recv(size - len(data))):
        data += chunk
    return data


@pytest.fixture
def tls_coordinator(tls_files: dict[str, Path]) -> Iterator[tuple[int, list[bytes]]]:
    """A coordinator on 127.0.0.1 that serves TLS and answers one LeaveGroup v3: every instance id removed (0).
    Yields its port and the request frames it received."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls_files["cert"], tls_files["key"])
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        try:
            raw, _ = server.accept()
            with context.wrap_socket(raw, server_side=True) as connection:
                (size,) = struct.unpack(">i", _exactly(connection, 4))
                frame = _exactly(connection, size)
                received.append(frame)
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                instance = b"app-1-0"
                body = struct.pack(">iihi", correlation_id, 0, 0, 1) + b"\x00\x00"
                body += struct.pack(">h", len(instance)) + instance + b"\x00\x00"
                connection.sendall(struct.pack(">i", len(body)) + body)
        except (OSError, struct.error):
            pass  # the client refused the certificate

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    server.close()
    thread.join(5)


def test_the_leave_group_goes_over_tls_verified_against_the_apps_ca(
    tls_files: dict[str, Path], tls_coordinator: tuple[int, list[bytes]]
) -> None:
    port, received = tls_coordinator
    security = WireSecurity.from_settings({"security.protocol": "SSL", "ssl.ca.pem": tls_files["ca"].read_text()})
    assert remove_static_members(("127.0.0.1", port), "g", ["app-1-0"], timeout=10, security=security) == {"app-1-0": 0}
    (frame,) = received
    assert frame.endswith(b"\x00\x01g\x00\x00\x00\x01\x00\x00\x00\x07app-1-0")


def test_a_broker_certificate_not_signed_by_the_apps_ca_is_refused(
    tls_files: dict[str, Path], tls_coordinator: tuple[int, list[bytes]]
) -> None:
    port, received = tls_coordinator
    security = WireSecurity(protocol="SSL", ca_file=str(tls_files["other_ca"]))
    with pytest.raises(LeaveGroupFailed, match="CERTIFICATE_VERIFY_FAILED"):
        remove_static_members(("127.0.0.1", port), "g", ["app-1-0"], timeout=10, security=security)
    assert received == []


def test_a_truncated_leave_group_answer_is_a_leave_group_failure_not_a_parse_error() -> None:
    """The coordinator's answer is read within the same error handling as the connection: a response shorter
    than its fields (a broker cut off mid-answer) is a :class:`LeaveGroupFailed`, which the admin client turns
    into ``KafkaUnavailable``, never a bare ``struct.error`` out of the reconcile."""
    with socket.create_server(("127.0.0.1", 0)) as server:

        def answer_short() -> None:
            connection, _ = server.accept()
            with connection:
                (size,) = struct.unpack(">i", _exactly(connection, 4))
                frame = _exactly(connection, size)
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                body = struct.pack(">iihi", correlation_id, 0, 0, 1) + b"\x00\x00\x00\x07app"  # instance id cut off
                connection.sendall(struct.pack(">i", len(body)) + body)

        thread = threading.Thread(target=answer_short, daemon=True)
        thread.start()
        with pytest.raises(LeaveGroupFailed, match=r"LeaveGroup to 127\.0\.0\.1"):
            remove_static_members(("127.0.0.1", server.getsockname()[1]), "g", ["app-1-0"], timeout=5)
        thread.join(5)
