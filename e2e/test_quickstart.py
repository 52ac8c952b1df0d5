"""The quick start (docs/quickstart.md) walked on the real stack with a package of the test's own: the example's
package copied under a unique name (``qs<id>``, in no image of the project), with unique topics, a unique
``application.id`` and namespace, through the page's commands: ``streamapp topics create``, ``streamapp image
build``, ``streamapp manifest``, ``kubectl apply``, ``kubectl logs``, then version 2 in a new image handed over
with ``handover.image`` and ``handover.outputs: TakeOver``.

Guarantees protected:
- the app image ``streamapp image build`` makes from a package folder runs as a StreamApp from the manifest
  ``streamapp manifest`` prints: its counts per user and minute are exactly plain Python's (with the record cache
  off, every update: ``1..n`` per key), and ``kubectl logs`` shows its pod's log;
- a handover brings new code without a second image: version 1's image lacks the function version 2 calls
  (``logic.page``), so the replay (on the operator's replay image, which lacks the package) and version 2 run the
  code of ``handover.image``, which the replay Job's ``app-code`` init container copies;
- ``TakeOver``: version 2 (one pod: version 1's replicas before its stop) writes version 1's output topic from
  where version 1 stopped, with clicks arriving during the stop and after it: per user and minute the topic reads
  exactly ``1..n`` across the two versions (no update lost or written twice), and version 2's new per-page topic holds
  every update of the whole history; version 1 is deleted.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from streamapp.windowed import windowed_serde_for

from e2e import cluster, replay

pytestmark = pytest.mark.e2e

EXAMPLE = cluster.ROOT / "examples" / "quickstart"
USERS = ("ann", "bob", "cid", "dee")
PAGES = ("/", "/Home/", "/cart?ref=ad", "/CART", "/checkout", "/search?q=kafka")
# clicks version 1 counts; produced as the handover starts (either version's); once version 1 stopped (version 2's)
BEFORE, DURING, AFTER = 240, 60, 120  # BEFORE: four minutes of history
MINUTE_MS = 60_000
APP, V2 = "clickstream", "clickstream-v2"
WINDOWED_KEY = windowed_serde_for("windowed:string:60000")


@dataclass(frozen=True)
class Package:
    """The test's copy of examples/quickstart: ``module`` its import name, ``prefix`` of its topics,
    ``application.id`` and image names."""

    folder: Path
    module: str
    prefix: str
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    def image(self, version: int) -> str:
        return f"localhost/{self.prefix}:{version}"

    def write(self, version: int) -> None:
        """Its sources as the example's (version 2), or without ``build_v2`` and ``logic.page`` (version 1)."""
        for name, cut in (("topology.py", "\n\ndef build_v2("), ("logic.py", "\n\ndef page(")):
            text = (EXAMPLE / "src" / "clickstream" / name).read_text().replace("clickstream", self.module)
            for topic in ("clicks", "clicks-per-user-minute", "clicks-per-page-minute"):
                text = text.replace(f'"{topic}"', f'"{self.prefix}-{topic}"')
            assert cut in text, f"examples/quickstart's {name} has no {cut.strip()}: the test's version 1 needs one"
            (self.folder / "src" / self.module / name).write_text(text if version == 2 else text[: text.index(cut)])

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``streamapp ARGS`` started in the package folder with the package importable (``pip install -e .``)."""
        env = {**cluster.process_env(), "PYTHONPATH": str(self.folder / "src")}
        env["UV"] = str(cluster.ROOT / "hack" / "bin" / "uv")  # the image build's `$UV build`
        self.started.append(subprocess.Popen([str(Path(sys.executable).parent / "streamapp"), *args],
                                             cwd=self.folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             text=True))  # fmt: skip
        return self.started[-1]

    @staticmethod
    def finish(started: subprocess.Popen[str]) -> str:
        """The stdout of a command ``start`` started, once it succeeded."""
        out, err = started.communicate(timeout=300)
        assert started.returncode == 0, f"{started.args!r}:\n{out[-2000:]}{err[-3000:]}"
        return out

    def streamapp(self, *args: str) -> str:
        return self.finish(self.start(*args))


@pytest.fixture
def package(tmp_path: Path) -> Iterator[Package]:
    """Version 1 of the test's package; its topics, consumer groups and images are deleted after the test."""
    unique = uuid.uuid4().hex[:6]
    found = Package(tmp_path / "qs", f"qs{unique}", f"qs-{unique}")
    shutil.copytree(EXAMPLE, found.folder, ignore=shutil.ignore_patterns(".venv", "__pycache__", ".state", "k8s"))
    (found.folder / "src" / "clickstream").rename(found.folder / "src" / found.module)
    pyproject = found.folder / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('name = "clickstream"', f'name = "{found.module}"'))
    found.write(1)
    try:
        yield found
    finally:
        for command in found.started:  # an image build a failure left running would tag its image after the rmi
            command.kill()
            command.wait()
        cluster.delete_topics(found.prefix)
        subprocess.run(["podman", "rmi", "--force", found.image(1), found.image(2)], capture_output=True, check=False)


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    created = cluster.create_namespace("quickstart")
    try:
        yield created
    finally:
        cluster.kubectl("delete", "streamreplays", "--all", "-n", created, "--wait=true", "--timeout=120s", check=False)
        cluster.delete_namespace(created)
        # its pods gone before the package's images are removed
        cluster.kubectl("wait", "--for=delete", "pods", "--all", "-n", created, "--timeout=60s", check=False)


def clicks(now_ms: int) -> list[tuple[str, str, str, int]]:
    """``(user, page, agent, ts)`` of BEFORE + DURING + AFTER clicks, every tenth a bot's: BEFORE a history, one a
    second over the four minutes before ``now_ms``'s, then live clicks 50 ms apart in its minute (one window per
    user and page across the switch). The live clicks span 9 s, less than the windows' 10 s grace: version 2's
    repartition interleaves the records of both input partitions, so a burst spanning more would be partly late
    for its per-page count, as in Kafka Streams."""
    minute = now_ms - now_ms % MINUTE_MS
    history = [minute - 4 * MINUTE_MS + n * 1_000 for n in range(BEFORE)]
    live = [minute + 1_000 + n * 50 for n in range(DURING + AFTER)]
    return [
        (random.Random(n).choice(USERS), random.Random(-n).choice(PAGES), "Googlebot" if n % 10 == 0 else "Firefox",
         ts)
        for n, ts in enumerate(history + live)
    ]  # fmt: skip


def produce(topic: str, views: list[tuple[str, str, str, int]]) -> None:
    producer = Producer({"bootstrap.servers": cluster.stack_env()["KAFKA_BOOTSTRAP"]})
    for user, page, agent, ts in views:
        producer.produce(topic, key=user, value=json.dumps({"page": page, "agent": agent, "ts": ts}))
    assert producer.flush(30) == 0


def running_counts(views: list[tuple[str, str, str, int]], per_page: bool) -> dict[str, list[int]]:
    """Every update of the count per user (or normalised page) and minute of the humans' ``views``: ``1..n``
    per key, as ``key@window start``; plain Python's reading of the page's topology."""
    counted = Counter(
        f"{(page.split('?')[0].rstrip('/').lower() or '/') if per_page else user}@{ts - ts % MINUTE_MS}"
        for user, page, agent, ts in views
        if not agent.lower().endswith("bot")
    )
    return replay.running_counts(dict(counted))


def read_counts(topic: str, expected: dict[str, list[int]]) -> dict[str, list[int]]:
    def key_text(raw: bytes) -> str:
        key = WINDOWED_KEY.deserialize(raw)
        assert key is not None
        return f"{key.key}@{key.start}"

    return replay.count_sequences(topic, sum(map(len, expected.values())), timeout_s=90, key_text=key_text)


def test_the_quick_start_runs_a_package_and_hands_over_to_a_new_image_taking_over_its_output(
    package: Package, namespace: str
) -> None:
    started, seconds = time.monotonic(), dict[str, float]()

    def lap(step: str) -> None:
        seconds[step] = round(time.monotonic() - started - sum(seconds.values()), 1)

    topic, per_user, per_page = (f"{package.prefix}-{t}" for t in ("clicks", "clicks-per-user-minute",
                                                                    "clicks-per-page-minute"))  # fmt: skip
    bootstrap = cluster.stack_env()["KAFKA_BOOTSTRAP"]
    views = clicks(int(time.time() * 1000))
    package.streamapp("topics", "create", "--topology", f"{package.module}.topology:build",
                      "--bootstrap-server", bootstrap, "--partitions", "2")  # fmt: skip
    package.streamapp("image", "build", ".", "--tag", package.image(1))
    lap("image 1")
    manifest = package.folder / "k8s" / "streamapp.yaml"
    manifest.parent.mkdir()
    manifest.write_text(package.streamapp(
        "manifest", "--topology", f"{package.module}.topology:build", "--name", APP, "--image", package.image(1),
        "--image-pull-policy", "Never", "--bootstrap-servers", bootstrap, "--application-id", package.prefix,
        # every update is a record (1..n per key); commits often, so version 2 is caught up (lag 0) soon
        "--set", "statestore.cache.max.bytes=0", "--set", "commit.interval.ms=500",
    ))  # fmt: skip
    cluster.kubectl("apply", "-n", namespace, "-f", str(manifest))
    package.write(2)  # the next version, built while version 1 starts
    build_2 = package.start("image", "build", ".", "--tag", package.image(2))
    cluster.wait_until(lambda: cluster.streamapp_settled(APP, 1, namespace), 120, "version 1 to be ready",
                       describe=lambda: str(cluster.get_json("streamapp", APP, namespace).get("status")))  # fmt: skip
    lap("version 1 ready")

    produce(topic, views[:BEFORE])
    expected = running_counts(views[:BEFORE], per_page=False)
    assert read_counts(per_user, expected) == expected, cluster.pod_log_problems(APP, namespace)
    log = cluster.kubectl("logs", "-n", namespace, f"{APP}-0", "-c", "streamapp")
    assert f"subscribed to {topic}" in log, log[-2000:]
    lap("version 1 counted")

    package.finish(build_2)
    replay_manifest = package.folder / "k8s" / "replay-v2.yaml"
    replay_manifest.write_text(package.streamapp(
        "manifest", "--topology", f"{package.module}.topology:build_v2", "--name", APP, "--replay", V2,
        "--mode", "handover", "--handover-image", package.image(2), "--outputs", "TakeOver",
    ))  # fmt: skip
    lap("image 2")
    cluster.kubectl("apply", "-n", namespace, "-f", str(replay_manifest))
    produce(topic, views[BEFORE : BEFORE + DURING])  # as version 1 stops
    after: list[int] = []

    def once_stopped(status: dict[str, Any]) -> None:  # the range ends where version 1 stopped: the rest is v2's
        if status.get("resolvedOffsets") and not after:
            produce(topic, views[BEFORE + DURING :])
            after.append(sum(o for parts in status["resolvedOffsets"]["to"].values() for o in parts.values()))

    status = replay.wait_phase(V2, namespace, ("Succeeded",), timeout_s=300, show=print, observe=once_stopped)
    assert after and BEFORE <= after[0] <= BEFORE + DURING, f"the switch at {after}: version 2 read none of {AFTER}"
    lap("handover")

    expected = running_counts(views, per_page=False)
    assert read_counts(per_user, expected) == expected, cluster.pod_log_problems(V2, namespace)
    expected = running_counts(views, per_page=True)
    assert read_counts(per_page, expected) == expected, cluster.pod_log_problems(V2, namespace)
    lap("version 2 counted")
    assert status["takeOver"]["outputs"] == [per_user]
    version_2 = cluster.get_json("streamapp", V2, namespace)
    assert (version_2["spec"]["image"], version_2["status"].get("readyReplicas")) == (package.image(2), 1)
    job = cluster.get_json("job", status["job"], namespace)["spec"]["template"]["spec"]
    assert [(c["name"], c["image"]) for c in job["initContainers"]] == [("app-code", package.image(2))]
    assert not cluster.kubectl("get", "streamapp", APP, "-n", namespace, "--ignore-not-found").strip()
    print(f"seconds per step: {seconds}, in all {sum(seconds.values()):.0f}")
