"""The node agent serves the kubelet's ``/containerLogs`` the way the API server asks for it (``kubectl logs``):
over TLS to clients whose certificate the cluster CA signed and to no other, the container's log file, its last
``tailLines`` lines cut at ``limitBytes``, and with ``follow`` what the container writes afterwards. Unit tests:
a real server on a free loopback port with certificates made by openssl, no cluster."""

from __future__ import annotations

import http.client
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.nodeagent.logserver import BadRequest, LogRequest, LogServer, log_slice, parse_request, server_context


def test_the_request_names_the_container_and_the_options_the_kubelet_takes() -> None:
    request = parse_request("/containerLogs/clicks/clickstream-0/streamapp?tailLines=10&limitBytes=500&follow=true")

    assert request == LogRequest("clicks", "clickstream-0", "streamapp", tail_lines=10, limit_bytes=500, follow=True)


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("/stats/summary", 404),
        ("/containerLogs/ns/pod", 404),
        ("/containerLogs/ns/../c", 400),
        ("/containerLogs/ns/pod/c?tailLines=-1", 400),
        ("/containerLogs/ns/pod/c?previous=true", 400),
    ],
)
def test_other_paths_bad_options_and_previous_are_refused(target: str, status: int) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_request(target)

    assert refused.value.status == status


def test_tail_lines_take_the_end_and_limit_bytes_cut_what_they_took() -> None:
    data = b"one\ntwo\nthree\n"

    assert log_slice(data, None, None) == data
    assert log_slice(data, 2, None) == b"two\nthree\n"
    assert log_slice(data, 0, None) == b""
    assert log_slice(data, 5, 6) == b"one\ntw"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a serving cert for 127.0.0.1 and a client cert it signed, and a client cert of another CA."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    folder = tmp_path_factory.mktemp("pki")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other-ca"):
        run("req", "-x509", *ec, "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "1", "-subj", f"/CN={ca}")
    (folder / "server.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    (folder / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    signed = (("server", "ca", "server.ext"), ("client", "ca", "client.ext"), ("stranger", "other-ca", "client.ext"))
    for name, ca, ext in signed:
        run("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "1", "-extfile", ext, "-out", f"{name}.crt")  # fmt: skip
    return folder


@pytest.fixture
def server(pki: Path, tmp_path: Path) -> Iterator[LogServer]:
    pods = tmp_path / "pods"
    (pods / "clicks" / "clickstream-0").mkdir(parents=True)
    (pods / "clicks" / "clickstream-0" / "streamapp.log").write_bytes(b"starting\nrestoring\nrunning\n")
    served = LogServer(pods, "127.0.0.1", 0, server_context(pki / "server.crt", pki / "server.key", pki / "ca.crt"))
    served.start()
    yield served
    served.stop()


def _connect(pki: Path, server: LogServer, client: str | None) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if client is not None:
        context.load_cert_chain(pki / f"{client}.crt", pki / f"{client}.key")
    return http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)


def test_a_client_of_the_cluster_ca_reads_the_containers_log_tail(pki: Path, server: LogServer) -> None:
    connection = _connect(pki, server, "client")
    connection.request("GET", "/containerLogs/clicks/clickstream-0/streamapp?tailLines=2")
    response = connection.getresponse()

    assert (response.status, response.read()) == (200, b"restoring\nrunning\n")
    connection.request("GET", "/containerLogs/clicks/clickstream-0/sidecar")
    missing = connection.getresponse()
    assert missing.status == 404
    assert b'container "sidecar" in pod "clicks/clickstream-0" has no log' in missing.read()


@pytest.mark.parametrize("client", ["stranger", None], ids=["another-ca", "no-certificate"])
def test_a_client_without_a_certificate_of_the_cluster_ca_is_refused(
    pki: Path, server: LogServer, client: str | None
) -> None:
    connection = _connect(pki, server, client)

    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)):
        connection.request("GET", "/containerLogs/clicks/clickstream-0/streamapp")
        connection.getresponse().read()


def test_follow_streams_what_the_container_writes_afterwards(pki: Path, server: LogServer) -> None:
    log_file = server.pods_dir / "clicks" / "clickstream-0" / "streamapp.log"
    connection = _connect(pki, server, "client")
    connection.request("GET", "/containerLogs/clicks/clickstream-0/streamapp?tailLines=1&follow=true")
    response = connection.getresponse()
    assert response.status == 200
    assert response.read(len(b"running\n")) == b"running\n"

    threading.Timer(0.2, lambda: log_file.open("ab").write(b"processed 200 records\n")).start()

    assert response.read(len(b"processed 200 records\n")) == b"processed 200 records\n"
    connection.close()
