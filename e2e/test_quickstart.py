"""The quick start (docs/quickstart.md) walked on the real stack by running the page's own commands: every line of
its ``bash`` blocks, as written, with only the app's names made unique (``e2e/quickstart_page.py``: ``clickstream``
becomes ``qs<hex>``, the word ``clicks`` ``qs<hex>-clicks``, in the commands and in the copy of the example's package),
but the install and local-run lines ``quickstart_page.NOT_RUN`` lists with why. A page line the test does not run,
or one that fails as written, fails the test: ``streamapp topics create``, ``streamapp image build``, ``streamapp
manifest``, ``kubectl create namespace``/``apply``/``wait``/``scale``/``get``/``describe``, ``streamapp topics
tail``, then version 2 in a new image handed over with ``handover.image`` and ``handover.outputs: TakeOver``.

Guarantees protected:
- the app image ``streamapp image build`` makes from a package folder runs as a StreamApp from the manifest
  ``streamapp manifest`` prints: its counts per user and minute are exactly plain Python's (with the record cache
  off, as the page's manifest sets it, every update: ``1..n`` per key), ``streamapp topics tail`` prints every
  one of them, ``kubectl logs`` shows its pod's log, and ``kubectl scale`` makes it 2/2;
- a handover brings new code without a second image: version 1's image lacks the function version 2 calls
  (``logic.page``), so the replay (on the operator's replay image, which lacks the package) and version 2 run the
  code of ``handover.image``, which the replay Job's ``app-code`` init container copies;
- ``TakeOver``: version 2 (two pods, ``--handover-replicas 2``) writes version 1's output topic from where version
  1 stopped, with clicks arriving during the stop and after it: per user and minute the topic reads exactly
  ``1..n`` across the two versions (no update lost or written twice), and version 2's new per-page topic holds
  every update of the whole history (and its tail prints them); version 1 is deleted.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from streamapp.windowed import windowed_serde_for

from e2e import cluster, replay
from e2e.quickstart_page import Walk, rename

pytestmark = pytest.mark.e2e

EXAMPLE = cluster.ROOT / "examples" / "quickstart"
USERS = ("ann", "bob", "cid", "dee")
PAGES = ("/", "/Home/", "/cart?ref=ad", "/CART", "/checkout", "/search?q=kafka")
# clicks version 1 counts; produced as the handover starts (either version's); once version 1 stopped (version 2's)
BEFORE, DURING, AFTER = 240, 60, 120  # BEFORE: four minutes of history
MINUTE_MS = 60_000
WINDOWED_KEY = windowed_serde_for("windowed:string:60000")


@dataclass(frozen=True)
class Package:
    """The test's copy of examples/quickstart renamed (``quickstart_page.rename``): ``name`` is ``qs<hex>``, its
    module, app and image name; ``namespace`` and topics start with ``<name>-clicks``."""

    folder: Path
    name: str

    @property
    def namespace(self) -> str:
        return f"{self.name}-clicks"

    def topic(self, page_name: str) -> str:
        return rename(page_name, self.name)

    def image(self, version: int) -> str:
        return f"localhost/{self.name}:{version}"

    def write(self, version: int) -> None:
        """Its sources as the example's (version 2), or without ``build_v2`` and ``logic.page`` (version 1)."""
        for name, cut in (("topology.py", "\n\ndef build_v2("), ("logic.py", "\n\ndef page(")):
            text = rename((EXAMPLE / "src" / "clickstream" / name).read_text(), self.name)
            assert cut in text, f"examples/quickstart's {name} has no {cut.strip()}: the test's version 1 needs one"
            (self.folder / "src" / self.name / name).write_text(text if version == 2 else text[: text.index(cut)])

    def walk(self) -> Walk:
        """The page's commands, run in the package folder with the package importable (for ``pip install -e .``),
        the stack's ``kubectl`` and ``KUBECONFIG``, and ``UV`` for the image build's ``$UV build``."""
        env = {**cluster.process_env(), "PYTHONPATH": str(self.folder / "src")}
        env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
        env["UV"] = str(cluster.ROOT / "hack" / "bin" / "uv")
        return Walk.of_page(self.name, self.folder, env)


@pytest.fixture
def package(tmp_path: Path, operator_installed: None) -> Iterator[Package]:
    """Version 1 of the test's package; its namespace, topics, consumer groups and images are deleted after the
    test."""
    found = Package(tmp_path / "qs", f"qs{uuid.uuid4().hex[:6]}")
    shutil.copytree(EXAMPLE, found.folder, ignore=shutil.ignore_patterns(".venv", "__pycache__", ".state"))
    (found.folder / "src" / "clickstream").rename(found.folder / "src" / found.name)
    for path in (found.folder / "pyproject.toml", found.folder / "streams.yaml"):
        path.write_text(rename(path.read_text(), found.name))
    found.write(1)
    try:
        yield found
    finally:
        created = found.namespace
        cluster.kubectl("delete", "streamreplays", "--all", "-n", created, "--wait=true", "--timeout=120s", check=False)
        cluster.delete_namespace(created)
        # its pods gone before the package's images are removed
        cluster.kubectl("wait", "--for=delete", "pods", "--all", "-n", created, "--timeout=60s", check=False)
        cluster.delete_topics(found.name)
        subprocess.run(["podman", "rmi", "--force", found.image(1), found.image(2)], capture_output=True, check=False)


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


def test_the_quick_start_pages_commands_run_a_package_and_hand_over_to_a_new_image_taking_over_its_output(
    package: Package,
) -> None:
    started, seconds = time.monotonic(), dict[str, float]()

    def lap(step: str) -> None:
        seconds[step] = round(time.monotonic() - started - sum(seconds.values()), 1)

    app, v2, namespace = package.name, f"{package.name}-v2", package.namespace
    topic, per_user, per_page = map(package.topic, ("clicks", "clicks-per-user-minute", "clicks-per-page-minute"))
    views = clicks(int(time.time() * 1000))
    page = package.walk()

    def settled(replicas: int, what: str) -> None:
        status = lambda: str(cluster.get_json("streamapp", app, namespace).get("status"))  # noqa: E731
        cluster.wait_until(lambda: cluster.streamapp_settled(app, replicas, namespace), 120, what, describe=status)

    try:
        page.run("streamapp topics create")
        page.run(f"streamapp image build . --tag {package.image(1)}")
        lap("image 1")
        page.run(f"streamapp manifest --topology {app}.topology:build ")
        page.run("kubectl create namespace")
        page.run("kubectl apply -n")
        package.write(2)  # the next version ("change your code, then build"), built while version 1 starts
        build_2 = page.start(f"streamapp image build . --tag {package.image(2)}")
        ready = page.start("kubectl wait streamapp/")
        settled(1, "version 1 to be ready")
        page.finish(ready, 30)
        lap("version 1 ready")

        produce(topic, views[:BEFORE])
        expected = running_counts(views[:BEFORE], per_page=False)
        assert read_counts(per_user, expected) == expected, cluster.pod_log_problems(app, namespace)
        log = cluster.kubectl("logs", "-n", namespace, f"{app}-0", "-c", "streamapp")
        assert f"subscribed to {topic}" in log, log[-2000:]
        tail = page.start(f"streamapp topics tail {per_user} ")
        lap("version 1 counted")

        page.run("kubectl scale streamapp")
        settled(2, "version 1 on 2 pods")
        assert " 2/2 " in page.run("kubectl get streamapps"), "kubectl get streamapps shows READY 2/2"
        assert "Ready" in page.run("kubectl describe streamapp")
        assert len(page.finish(tail, 60).splitlines()) == sum(map(len, expected.values())), "a line per update"
        lap("version 1 scaled")

        page.finish(build_2)
        page.run(f"streamapp manifest --topology {app}.topology:build_v2 ")
        lap("image 2")
        page.run("kubectl apply -n")
        produce(topic, views[BEFORE : BEFORE + DURING])  # as version 1 stops
        handed_over = page.start("kubectl wait streamreplay/")
        after: list[int] = []

        def once_stopped(status: dict[str, Any]) -> None:  # the range ends where version 1 stopped: the rest is v2's
            if status.get("resolvedOffsets") and not after:
                produce(topic, views[BEFORE + DURING :])
                after.append(sum(o for parts in status["resolvedOffsets"]["to"].values() for o in parts.values()))

        status = replay.wait_phase(v2, namespace, ("Succeeded",), timeout_s=300, show=print, observe=once_stopped)
        page.finish(handed_over, 30)
        assert after and BEFORE <= after[0] <= BEFORE + DURING, f"the switch at {after}: version 2 read none of {AFTER}"
        lap("handover")

        expected = running_counts(views, per_page=False)
        assert read_counts(per_user, expected) == expected, cluster.pod_log_problems(v2, namespace)
        expected = running_counts(views, per_page=True)
        tail = page.start(f"streamapp topics tail {per_page} ")
        assert read_counts(per_page, expected) == expected, cluster.pod_log_problems(v2, namespace)
        assert len(page.finish(tail, 60).splitlines()) == sum(map(len, expected.values())), "a line per update"
        lap("version 2 counted")
        page.finished()
    finally:
        page.stop()
    assert status["takeOver"]["outputs"] == [per_user]
    version_2 = cluster.get_json("streamapp", v2, namespace)
    assert (version_2["spec"]["image"], version_2["status"].get("readyReplicas")) == (package.image(2), 2)
    job = cluster.get_json("job", status["job"], namespace)["spec"]["template"]["spec"]
    assert [(c["name"], c["image"]) for c in job["initContainers"]] == [("app-code", package.image(2))]
    assert not cluster.kubectl("get", "streamapp", app, "-n", namespace, "--ignore-not-found").strip()
    print(f"seconds per step: {seconds}, in all {sum(seconds.values()):.0f}")
