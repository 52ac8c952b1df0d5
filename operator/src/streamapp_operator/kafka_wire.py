"""Kafka's ``LeaveGroup`` request sent by hand: remove static members from a consumer group (KIP-345).

A pod removed by a scale-down must leave the consumer group at once, so that its partitions move now instead of
after the broker's session timeout. A static member (``group.instance.id``) never leaves by itself: librdkafka,
like the Java client, sends a *temporary* leave on close (KIP-848 member epoch -2; the classic protocol sends no
LeaveGroup at all), which is what keeps a restarting pod's partitions for it. Kafka's answer for the permanent
case is the admin ``RemoveMembersFromConsumerGroup`` (a ``LeaveGroup`` naming the ``group.instance.id`` with an
empty member id), which the coordinator also applies to KIP-848 consumer groups, but confluent-kafka (2.16) does
not expose it. This module sends that one request: ``LeaveGroup`` v3 (the oldest version Kafka 4 serves, and the
first with static members) to the group's coordinator, over the connection the operator's admin client uses
(:class:`WireSecurity`, from the same librdkafka settings):

- TLS (``SSL``, ``SASL_SSL``): Python's ``ssl``, the server certificate verified against the CA of the app's
  tls Secret (``ssl.ca.pem``, ``ssl.ca.location``) or the system CAs, and its host name checked unless
  ``ssl.endpoint.identification.algorithm`` is ``none`` (librdkafka's rules);
- SASL (``SASL_PLAINTEXT``, ``SASL_SSL``): ``SaslHandshake`` v1 naming the mechanism, then ``SaslAuthenticate``
  v1 rounds (KIP-152): one for ``PLAIN`` (RFC 4616), two for ``SCRAM-SHA-256``/``SCRAM-SHA-512`` (RFC 5802,
  computed by the ``scramp`` library, the server's final signature checked).

Every read and write is bounded by one deadline (``timeout`` seconds), so a broker that does not answer, or a
refused login, is a :class:`LeaveGroupFailed` naming the cause, never a hang. Passwords are never in a message.

Wire format (Kafka protocol guide): a request is ``int32 size`` + header v1 (``int16 api_key``, ``int16
api_version``, ``int32 correlation_id``, ``string client_id``) + body; a response is ``int32 size`` + ``int32
correlation_id`` + body. Bodies: ``LeaveGroup`` v3 (13) ``string group_id, [member_id string, group_instance_id
nullable string]`` -> ``int32 throttle_time_ms, int16 error_code, [member_id, group_instance_id, int16
error_code]``; ``SaslHandshake`` v1 (17) ``string mechanism`` -> ``int16 error_code, [string mechanism]``;
``SaslAuthenticate`` v1 (36) ``bytes auth_bytes`` -> ``int16 error_code, nullable string error_message, bytes
auth_bytes, int64 session_lifetime_ms``.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import scramp

LEAVE_GROUP = 13
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
VERSION = 3
CLIENT_ID = "streamapp-operator"
#: Kafka's error code for a member (instance id) the coordinator does not know.
UNKNOWN_MEMBER_ID = 25
#: The SASL mechanisms this module speaks (those ``spec.kafka.authentication.mechanism`` allows).
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class LeaveGroupFailed(Exception):
    """The coordinator could not be reached, refused the login, or answered with an error for the whole request."""


@dataclass(frozen=True)
class WireSecurity:
    """How to reach a broker: ``protocol`` (librdkafka's ``security.protocol``), the SASL ``mechanism``,
    ``username`` and ``password``, the CA as PEM text (``ca_pem``) or file (``ca_file``; neither: the system CAs),
    and whether the certificate's host name is checked. ``repr`` leaves the secrets out."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = field(default="", repr=False)
    ca_pem: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    check_hostname: bool = True

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> WireSecurity:
        """From librdkafka settings (``security.protocol``, ``sasl.mechanism`` or ``sasl.mechanisms``,
        ``sasl.username``, ``sasl.password``, ``ssl.ca.pem``, ``ssl.ca.location``,
        ``ssl.endpoint.identification.algorithm``). Raises :class:`LeaveGroupFailed` for a protocol or
        mechanism this module does not speak (e.g. ``GSSAPI``, ``OAUTHBEARER``)."""
        protocol = settings.get("security.protocol", "PLAINTEXT").upper()
        mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "PLAIN"
        if protocol not in PROTOCOLS:
            raise LeaveGroupFailed(f"security.protocol {protocol} is not supported (one of {', '.join(PROTOCOLS)})")
        if protocol.startswith("SASL") and mechanism.upper() not in MECHANISMS:
            raise LeaveGroupFailed(f"SASL mechanism {mechanism} is not supported (one of {', '.join(MECHANISMS)})")
        return cls(
            protocol=protocol,
            mechanism=mechanism.upper(),
            username=settings.get("sasl.username", ""),
            password=settings.get("sasl.password", ""),
            ca_pem=settings.get("ssl.ca.pem"),
            ca_file=settings.get("ssl.ca.location"),
            check_hostname=settings.get("ssl.endpoint.identification.algorithm", "https").lower() != "none",
        )

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL")


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A framed request: size, header v1 (``api_key``, ``version``, ``correlation_id``, client id), ``body``."""
    header = struct.pack(">hhi", api_key, version, correlation_id) + _string(CLIENT_ID)
    return struct.pack(">i", len(header) + len(body)) + header + body


def leave_group_request(group_id: str, instance_ids: Sequence[str], correlation_id: int = 1) -> bytes:
    """The framed ``LeaveGroup`` v3 request removing ``instance_ids`` (empty member ids: an administrative removal)."""
    return request_frame(LEAVE_GROUP, VERSION, correlation_id, _leave_group_body(group_id, instance_ids))


def _leave_group_body(group_id: str, instance_ids: Sequence[str]) -> bytes:
    members = struct.pack(">i", len(instance_ids)) + b"".join(_string("") + _string(i) for i in instance_ids)
    return _string(group_id) + members


class _Reader:
    """Reads the fields of one response frame in order; a short frame raises ``struct.error``."""

    def __init__(self, frame: bytes) -> None:
        self.frame, self.offset = frame, 0

    def number(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.frame, self.offset)
        self.offset += struct.calcsize(fmt)
        return int(value)

    def text(self) -> str | None:
        data = self._sized(self.number(">h"))
        return None if data is None else data.decode()

    def blob(self) -> bytes:
        return self._sized(self.number(">i")) or b""

    def _sized(self, length: int) -> bytes | None:
        if length < 0:
            return None
        if self.offset + length > len(self.frame):
            raise struct.error("the response is shorter than its fields")
        data = self.frame[self.offset : self.offset + length]
        self.offset += length
        return data


def _response(frame: bytes, correlation_id: int, api: str) -> _Reader:
    reader = _Reader(frame)
    if reader.number(">i") != correlation_id:
        raise LeaveGroupFailed(f"{api}: the response answers another request")
    return reader


def parse_leave_group_response(frame: bytes, correlation_id: int = 1) -> tuple[int, dict[str, int]]:
    """``(error_code, {group_instance_id: error_code})`` of a ``LeaveGroup`` v3 response (without its size)."""
    return _leave_group_answers(_response(frame, correlation_id, "LeaveGroup"))


def _leave_group_answers(reader: _Reader) -> tuple[int, dict[str, int]]:
    """The body of a ``LeaveGroup`` v3 response, after its correlation id."""
    reader.number(">i")  # throttle_time_ms
    error = reader.number(">h")
    members: dict[str, int] = {}
    for _ in range(reader.number(">i")):
        reader.text()  # member_id
        instance = reader.text()
        code = reader.number(">h")
        if instance is not None:
            members[instance] = code
    return error, members


class _Connection:
    """One connection to a broker, every read and write bounded by the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.correlation_id = sock, deadline, 0

    def call(self, api_key: int, version: int, body: bytes, api: str) -> _Reader:
        """Send one request and return its response's body (after the correlation id)."""
        self.correlation_id += 1
        self._arm()
        self.sock.sendall(request_frame(api_key, version, self.correlation_id, body))
        (size,) = struct.unpack(">i", self._read(4))
        return _response(self._read(size), self.correlation_id, api)

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        self.sock.settimeout(left)

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            self._arm()
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise OSError("connection closed by the broker")
            data += chunk
        return data


def _connect(host: str, port: int, security: WireSecurity, deadline: float) -> _Connection:
    sock = socket.create_connection((host, port), timeout=max(0.001, deadline - time.monotonic()))
    if security.tls:
        try:
            context = ssl.create_default_context(cafile=security.ca_file, cadata=security.ca_pem)
            context.check_hostname = security.check_hostname
            sock = context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
    return _Connection(sock, deadline)


def _authenticate(connection: _Connection, security: WireSecurity) -> None:
    """SaslHandshake v1 then SaslAuthenticate v1 rounds; raises :class:`LeaveGroupFailed` on a refusal."""
    reader = connection.call(SASL_HANDSHAKE, 1, _string(security.mechanism), "SaslHandshake")
    error = reader.number(">h")
    offered = [reader.text() for _ in range(reader.number(">i"))]
    if error:
        enabled = ", ".join(m for m in offered if m) or "none"
        raise LeaveGroupFailed(f"the broker does not enable SASL mechanism {security.mechanism} (enabled: {enabled})")
    if security.mechanism == "PLAIN":
        _sasl_round(connection, security, f"\0{security.username}\0{security.password}".encode())
        return
    client = scramp.ScramClient([security.mechanism], security.username, security.password)
    server_first = _sasl_round(connection, security, client.get_client_first().encode())
    try:
        client.set_server_first(server_first.decode())
        server_final = _sasl_round(connection, security, client.get_client_final().encode())
        client.set_server_final(server_final.decode())
    except scramp.ScramException as exc:
        raise LeaveGroupFailed(f"SASL {security.mechanism} authentication: {exc}") from exc


def _sasl_round(connection: _Connection, security: WireSecurity, auth_bytes: bytes) -> bytes:
    reader = connection.call(SASL_AUTHENTICATE, 1, _bytes(auth_bytes), "SaslAuthenticate")
    error, message, answer = reader.number(">h"), reader.text(), reader.blob()
    if error:
        who = f"user {security.username!r} with {security.mechanism}"
        raise LeaveGroupFailed(f"SASL authentication of {who} failed (Kafka error code {error}): {message}")
    return answer


def remove_static_members(
    coordinator: tuple[str, int],
    group_id: str,
    instance_ids: Sequence[str],
    timeout: float = 10.0,
    security: WireSecurity | None = None,
) -> dict[str, int]:
    """Remove the static members ``instance_ids`` from ``group_id`` through its ``coordinator`` (host, port),
    over ``security`` (default PLAINTEXT), within ``timeout`` seconds in all.

    Returns each instance id's error code (0: removed; ``UNKNOWN_MEMBER_ID``: it was not a member). Raises
    :class:`LeaveGroupFailed` when the coordinator cannot be reached in time, the TLS handshake or the SASL
    login fails, or it refuses the request as a whole.
    """
    security = security or WireSecurity()
    host, port = coordinator
    deadline = time.monotonic() + timeout
    try:
        connection = _connect(host, port, security, deadline)
        with connection.sock:
            if security.sasl:
                _authenticate(connection, security)
            reader = connection.call(LEAVE_GROUP, VERSION, _leave_group_body(group_id, instance_ids), "LeaveGroup")
            error, answers = _leave_group_answers(reader)
    except (OSError, struct.error) as exc:  # ssl.SSLError and TimeoutError are OSErrors; a short answer too
        raise LeaveGroupFailed(f"LeaveGroup to {host}:{port} ({security.protocol}): {exc}") from exc
    if error:
        raise LeaveGroupFailed(f"LeaveGroup of group {group_id!r}: Kafka error code {error}")
    return answers
