"""Whatever a pod answers on ``/status`` (it runs the user's code), reading it never raises past the reader,
never holds more than ``MAX_STATUS_BYTES`` in memory, and a malformed document restores nothing.

A raw TCP server on 127.0.0.1 plays the pod: it sends exactly the bytes a test gives, then closes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from streamapp_operator.instances import (
    MAX_PODS_ASKED,
    MAX_STATUS_BYTES,
    STATUS_DEADLINE,
    HttpInstanceReader,
    InstanceUnavailable,
    read_statuses,
)
from streamapp_operator.streamapps.pod_status import RestoringTask, restore_view


class RawPod:
    """Answers each connection with ``answer`` (bytes) after reading the request; ``hang``: never answers."""

    def __init__(self, answer: bytes = b"", hang: bool = False) -> None:
        self.answer, self.hang = answer, hang
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            if self.hang:
                self._stop.wait(30)
                return
            with contextlib.suppress(OSError):  # the reader stopped reading (an oversized answer)
                conn.sendall(self.answer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()


@pytest.fixture
def pod() -> Iterator[Any]:
    pods: list[RawPod] = []

    def start(answer: bytes = b"", hang: bool = False) -> RawPod:
        pods.append(RawPod(answer, hang))
        return pods[-1]

    yield start
    for started in pods:
        started.close()


def _http(body: bytes, length: int | None = None, status: bytes = b"200 OK") -> bytes:
    size = len(body) if length is None else length
    return b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % size + body


@pytest.mark.parametrize(
    "answer",
    [
        _http(b'{"workers": []', length=500),  # truncated: IncompleteRead
        b"garbage that is no status line\r\n\r\n",  # BadStatusLine
        b"",  # closed without a word: RemoteDisconnected
        _http(b"[" * 100_000 + b"]" * 100_000),  # nested past the recursion limit: RecursionError
        _http(b"\xff\xfe not utf-8"),
        _http(b"[1, 2]"),  # JSON, not an object
        _http(b"{}", status=b"500 Internal Server Error"),
    ],
    ids=["truncated", "bad-status-line", "closed", "deeply-nested", "not-utf8", "not-an-object", "http-500"],
)
def test_any_malformed_answer_is_instance_unavailable_never_another_exception(pod: Any, answer: bytes) -> None:
    server = pod(answer)
    with pytest.raises(InstanceUnavailable, match=f"GET http://127.0.0.1:{server.port}/status"):
        HttpInstanceReader(timeout=2.0).status("127.0.0.1", server.port)


def test_an_answer_larger_than_the_limit_is_refused_without_reading_it_all(pod: Any) -> None:
    body = b'{"x": "' + b"a" * (8 * MAX_STATUS_BYTES) + b'"}'
    server = pod(_http(body))
    with pytest.raises(InstanceUnavailable, match=f"larger than {MAX_STATUS_BYTES} bytes"):
        HttpInstanceReader(timeout=2.0).status("127.0.0.1", server.port)


def test_an_answer_just_within_the_limit_is_read(pod: Any) -> None:
    document = b'{"workers": [], "pad": "' + b"a" * (MAX_STATUS_BYTES - 40) + b'"}'
    assert len(document) <= MAX_STATUS_BYTES
    server = pod(_http(document))
    assert HttpInstanceReader(timeout=2.0).status("127.0.0.1", server.port)["workers"] == []


@pytest.mark.parametrize(
    "document",
    [
        {"workers": {"thread": 0}},
        {"workers": [None]},
        {"workers": ["x"]},
        {"workers": [{"tasks": {"0_0": "restoring"}}]},
        {"workers": [{"tasks": [None, "0_0", 3]}]},
        {"workers": "all"},
        {"workers": [{"tasks": "none"}]},
    ],
    ids=[
        "workers-object",
        "worker-null",
        "worker-string",
        "tasks-object",
        "task-not-object",
        "workers-string",
        "tasks-string",
    ],
)
def test_a_document_without_the_runtimes_shape_restores_nothing_and_does_not_raise(document: dict[str, Any]) -> None:
    assert restore_view({"p-0": document}).tasks == ()


def test_well_formed_tasks_beside_malformed_ones_still_count() -> None:
    document = {"workers": [None, {"tasks": ["x", {"task_id": "0_1", "state": "restoring", "restore_remaining": True}]},
                            {"tasks": [{"task_id": "0_2", "state": "restoring", "restore_remaining": 9}]}]}  # fmt: skip
    assert restore_view({"p-0": document}).tasks == (RestoringTask("p-0", "0_1", 0), RestoringTask("p-0", "0_2", 9))


def test_hung_pods_cost_one_overall_deadline_not_a_timeout_each(pod: Any) -> None:
    hung = pod(hang=True)
    answering = pod(_http(b'{"workers": []}'))
    reader = HttpInstanceReader()  # the defaults main.py uses
    names = [(f"hung-{i}", "127.0.0.1") for i in range(4)]
    started = time.monotonic()
    documents = read_statuses(reader, names, hung.port)
    took = time.monotonic() - started
    assert took < STATUS_DEADLINE + 0.5, took  # sequentially: 4 x 2 s
    assert sorted(documents) == [name for name, _ in names]
    assert all(isinstance(why, str) and "timed out" in why for why in documents.values()), documents
    # However slow a reader's own timeouts, the overall deadline bounds the wait.
    slow = HttpInstanceReader(timeout=30.0, deadline=30.0)
    started = time.monotonic()
    documents = read_statuses(slow, names, hung.port, deadline=1.0)
    assert time.monotonic() - started < 1.5
    assert documents == {name: "no answer within 1 s" for name, _ in names}
    # A pod that answers is read beside hung ones (concurrently, within the same deadline).
    mixed = read_statuses(_Routed({"ok": answering.port, "hung": hung.port}), [("ok", "ok"), ("hung", "hung")], 0)
    assert mixed["ok"] == {"workers": []} and "timed out" in str(mixed["hung"])


class _Routed:
    """An ``InstanceReader`` that sends each "IP" to a port of 127.0.0.1."""

    def __init__(self, ports: dict[str, int]) -> None:
        self.ports, self.reader = ports, HttpInstanceReader()

    def status(self, pod_ip: str, port: int) -> dict[str, Any]:
        return self.reader.status("127.0.0.1", self.ports[pod_ip])


def test_a_pod_dripping_its_answer_is_dropped_at_the_deadline(pod: Any) -> None:
    class Drip(RawPod):
        def _answer(self, conn: socket.socket) -> None:
            with conn, contextlib.suppress(OSError):
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
                while not self._stop.wait(0.2):
                    conn.sendall(b" ")

    drip = Drip()
    try:
        started = time.monotonic()
        with pytest.raises(InstanceUnavailable):
            HttpInstanceReader(timeout=2.0, deadline=1.0).status("127.0.0.1", drip.port)
        assert time.monotonic() - started < 2.0
    finally:
        drip.close()


def test_at_most_max_pods_are_asked_and_the_others_are_named() -> None:
    asked: list[str] = []

    class Reader:
        def status(self, pod_ip: str, port: int) -> dict[str, Any]:
            asked.append(pod_ip)
            return {"workers": []}

    pods = [(f"p-{i:02d}", f"10.0.0.{i}") for i in range(MAX_PODS_ASKED + 2)]
    documents = read_statuses(Reader(), pods, 8080)
    assert len(asked) == MAX_PODS_ASKED
    assert documents["p-11"] == f"not asked: at most {MAX_PODS_ASKED} pods are asked per reconcile"
    assert documents["p-00"] == {"workers": []}


def test_a_reader_raising_anything_makes_the_pod_unreadable_not_the_reconcile_fail() -> None:
    class Broken:
        def status(self, pod_ip: str, port: int) -> dict[str, Any]:
            raise RecursionError("maximum recursion depth exceeded")

    assert read_statuses(Broken(), [("p-0", "10.0.0.1")], 8080) == {
        "p-0": "RecursionError: maximum recursion depth exceeded"
    }
