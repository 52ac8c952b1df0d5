"""The Kafka Streams (Java) peer: ``bench/peers/kstreams`` (a Maven project) built once per Kafka version into
``.cache/bench-kstreams/<version>/`` (git-ignored; Maven's repository is ``.cache/m2``, shared with the Spark
connector fetch), then run with ``java -cp``. A ``.complete`` file marks a finished build, so a second call
returns at once; the build runs under a file lock (two cold benchmark runs do not build at once).

The apps are the benchmark's topologies with Kafka Streams' defaults, the record cache
(``statestore.cache.max.bytes`` 10 MiB) among them: ``bench.KeyedCount`` (count), ``bench.HourlyWindowedCount``
(windowed, retention 365 days) and ``bench.FlightsWithPlanes`` (join); ``bench.WindowedCountAfterRepartition`` is
the late-drop benchmark's.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

__all__ = ["KAFKA_STREAMS_VERSION", "TOPOLOGIES", "ensure_kstreams", "kstreams_command", "windowed_count_command"]

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "bench" / "peers" / "kstreams"
CACHE = REPO / ".cache"
KAFKA_STREAMS_VERSION = "4.4.0"
TOPOLOGIES = {"count": "bench.KeyedCount", "windowed": "bench.HourlyWindowedCount", "join": "bench.FlightsWithPlanes"}
"""The benchmark topologies the peer runs, with their main classes."""


def _sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted([PROJECT / "pom.xml", *PROJECT.joinpath("src").rglob("*.java")]):
        digest.update(path.relative_to(PROJECT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_kstreams(version: str = KAFKA_STREAMS_VERSION) -> str:
    """The classpath of the built peer (its jar and its runtime dependencies), building it when needed.

    Raises RuntimeError with Maven's output when the build fails, FileNotFoundError without ``mvn``.
    """
    home = CACHE / "bench-kstreams" / version
    marker = home / ".complete"
    home.parent.mkdir(parents=True, exist_ok=True)
    with (home.parent / f"{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        digest = _sources_digest()
        if not marker.exists() or marker.read_text() != digest:
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            mvn = shutil.which("mvn")
            if mvn is None:
                raise FileNotFoundError("mvn is needed to build the Kafka Streams peer (apt-get install maven)")
            command = [
                mvn,
                "-q",
                "-B",
                "-f",
                str(PROJECT / "pom.xml"),
                f"-Dmaven.repo.local={CACHE / 'm2'}",
                f"-Dkafka.version={version}",
                f"-Dpeer.build.dir={home / 'build'}",
                "-Dmaven.test.skip=true",
                "package",
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={home / 'lib'}",
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"building the Kafka Streams peer failed:\n{done.stdout}\n{done.stderr}")
            marker.write_text(digest)
    return f"{home / 'build' / 'kstreams-peer-1.jar'}:{home / 'lib' / '*'}"


def kstreams_command(
    classpath: str,
    bootstrap: str,
    application_id: str,
    input_topic: str,
    output_topic: str,
    guarantee: str,
    commit_interval_ms: int,
    state_dir: Path,
    cache_max_bytes: int | None = None,
    topology: str = "count",
    planes_topic: str | None = None,
) -> list[str]:
    """``java ... bench.KeyedCount`` (or the main class of another of ``TOPOLOGIES``) with its arguments
    (``cache_max_bytes`` None: Kafka's default cache; ``planes_topic`` is the join's table)."""
    command = [
        "java",
        "-Xmx1g",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath,
        TOPOLOGIES[topology],
    ]
    if topology == "join":
        if planes_topic is None:
            raise ValueError("the join needs planes_topic")
        command.append(planes_topic)
    command += [
        bootstrap,
        application_id,
        input_topic,
        output_topic,
        guarantee,
        str(commit_interval_ms),
        str(state_dir),
    ]
    if cache_max_bytes is not None:
        command.append(str(cache_max_bytes))
    return command


def windowed_count_command(
    classpath: str,
    bootstrap: str,
    application_id: str,
    input_topic: str,
    output_topic: str,
    commit_interval_ms: int,
    state_dir: Path,
    window_ms: int,
    grace_ms: int,
) -> list[str]:
    """``java ... bench.WindowedCountAfterRepartition`` with its arguments (at-least-once, one stream thread)."""
    return [
        "java",
        "-Xmx1g",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath,
        "bench.WindowedCountAfterRepartition",
        bootstrap,
        application_id,
        input_topic,
        output_topic,
        str(commit_interval_ms),
        str(state_dir),
        str(window_ms),
        str(grace_ms),
    ]
