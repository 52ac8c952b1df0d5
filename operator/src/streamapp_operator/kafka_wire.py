"""Kafka's ``LeaveGroup`` request sent by hand: remove static members from a consumer group (KIP-345).

A pod removed by a scale-down must leave the consumer group at once, so that its partitions move now instead of
after the broker's session timeout. A static member (``group.instance.id``) never leaves by itself: librdkafka,
like the Java client, sends a *temporary* leave on close (KIP-848 member epoch -2; the classic protocol sends no
LeaveGroup at all), which is what keeps a restarting pod's partitions for it. Kafka's answer for the permanent
case is the admin ``RemoveMembersFromConsumerGroup`` (a ``LeaveGroup`` naming the ``group.instance.id`` with an
empty member id), which the coordinator also applies to KIP-848 consumer groups, but confluent-kafka (2.16) does
not expose it. This module sends that one request: ``LeaveGroup`` v3 (the oldest version Kafka 4 serves, and the
first with static members), over PLAINTEXT to the group's coordinator.

Wire format (Kafka protocol guide): a request is ``int32 size`` + header v1 (``int16 api_key`` 13, ``int16
api_version`` 3, ``int32 correlation_id``, ``string client_id``) + body (``string group_id``, ``[member_id
string, group_instance_id nullable string]``); the response is ``int32 size`` + ``int32 correlation_id`` +
``int32 throttle_time_ms``, ``int16 error_code``, ``[member_id, group_instance_id, int16 error_code]``.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

LEAVE_GROUP = 13
VERSION = 3
CLIENT_ID = "streamapp-operator"
#: Kafka's error code for a member (instance id) the coordinator does not know.
UNKNOWN_MEMBER_ID = 25


class LeaveGroupFailed(Exception):
    """The coordinator could not be reached, or answered with an error for the whole request."""


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def leave_group_request(group_id: str, instance_ids: Sequence[str], correlation_id: int = 1) -> bytes:
    """The framed ``LeaveGroup`` v3 request removing ``instance_ids`` (empty member ids: an administrative removal)."""
    header = struct.pack(">hhi", LEAVE_GROUP, VERSION, correlation_id) + _string(CLIENT_ID)
    members = struct.pack(">i", len(instance_ids)) + b"".join(_string("") + _string(i) for i in instance_ids)
    body = _string(group_id) + members
    return struct.pack(">i", len(header) + len(body)) + header + body


def parse_leave_group_response(frame: bytes, correlation_id: int = 1) -> tuple[int, dict[str, int]]:
    """``(error_code, {group_instance_id: error_code})`` of a ``LeaveGroup`` v3 response (without its size)."""
    offset = 0

    def take(fmt: str) -> int:
        nonlocal offset
        (value,) = struct.unpack_from(fmt, frame, offset)
        offset += struct.calcsize(fmt)
        return int(value)

    def text() -> str | None:
        nonlocal offset
        length = take(">h")
        if length < 0:
            return None
        value = frame[offset : offset + length].decode()
        offset += length
        return value

    if take(">i") != correlation_id:
        raise LeaveGroupFailed("LeaveGroup: the response answers another request")
    take(">i")  # throttle_time_ms
    error = take(">h")
    members: dict[str, int] = {}
    for _ in range(take(">i")):
        text()  # member_id
        instance = text()
        code = take(">h")
        if instance is not None:
            members[instance] = code
    return error, members


def remove_static_members(
    host: str, port: int, group_id: str, instance_ids: Sequence[str], timeout: float = 10.0
) -> dict[str, int]:
    """Remove the static members ``instance_ids`` from ``group_id`` through its coordinator at ``host:port``.

    Returns each instance id's error code (0: removed; ``UNKNOWN_MEMBER_ID``: it was not a member). Raises
    :class:`LeaveGroupFailed` when the coordinator cannot be reached or refuses the request as a whole.
    """
    request = leave_group_request(group_id, instance_ids)
    try:
        with socket.create_connection((host, port), timeout=timeout) as connection:
            connection.sendall(request)
            (size,) = struct.unpack(">i", _read(connection, 4))
            frame = _read(connection, size)
    except (OSError, struct.error) as exc:
        raise LeaveGroupFailed(f"LeaveGroup to {host}:{port}: {exc}") from exc
    error, members = parse_leave_group_response(frame)
    if error:
        raise LeaveGroupFailed(f"LeaveGroup of group {group_id!r}: Kafka error code {error}")
    return members


def _read(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise OSError("connection closed by the broker")
        data += chunk
    return data
