"""Deleting a StreamReplay in the middle of a ``handover.outputs: TakeOver`` before its new version exists scales
the old version back to its recorded replicas (it goes on from where it stopped), and says so in the deletion's
event; once the new version was created (it writes the taken-over topics) the old version stays stopped. The
kopf deletion handler over the hand-written cluster fake."""

from __future__ import annotations

from typing import Any

import pytest
from replay_fakes import NS, replay_world
from streamapp_operator.streamreplays import handlers


@pytest.mark.parametrize(
    ("status", "replicas"),
    [
        ({"phase": "Running", "takeOver": {"replicas": 3, "applicationId": "flights", "state": "Stopped"}}, 3),
        (
            {
                "phase": "HandingOver",
                "takeOver": {"replicas": 3, "applicationId": "flights", "state": "Stopped"},
                "handover": [
                    {"name": "setGroupOffsets", "state": "Done"},
                    {"name": "createNewVersion", "state": "Done"},
                ],
                "newVersion": "flights-v2",
            },
            0,
        ),
    ],
    ids=["before-the-new-version", "after"],
)
def test_deleting_a_takeover_before_its_new_version_scales_the_old_version_back(
    status: dict[str, Any], replicas: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    world, cluster, _ = replay_world()
    cluster.objects[("StreamApp", NS, "flights")]["spec"]["replicas"] = 0  # stopped by the replay
    monkeypatch.setattr(handlers, "_world", world)
    said: list[tuple[str, str]] = []
    monkeypatch.setattr(handlers.kopf, "info", lambda body, reason, message: said.append((reason, message)))
    monkeypatch.setattr(handlers.kopf, "warn", lambda body, reason, message: said.append((reason, message)))
    meta = {"uid": "replay-uid", "namespace": NS, "name": "flights-v2"}
    handlers.forget_streamreplay(body={}, meta=meta, spec={"appRef": {"name": "flights"}}, status=status)  # type: ignore[arg-type]
    assert cluster.get("StreamApp", NS, "flights")["spec"]["replicas"] == replicas
    assert ("scaled back to 3" in said[0][1]) == (replicas == 3)
