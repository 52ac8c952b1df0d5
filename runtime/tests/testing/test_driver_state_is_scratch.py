"""The TopologyTestDriver's state is scratch: removed by ``close`` (Kafka's ``stateDirectory.clean()``), and
never synced to disk per record (a driver runs at the speed of a unit test)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from streamapp import StreamsBuilder
from streamapp.config import ConfigError
from streamapp.testing import TopologyTestDriver

APP = "scratch-state"


def per_carrier() -> StreamsBuilder:
    """departures keyed by carrier -> count per carrier (RocksDB store ``counts``) -> counts."""
    builder = StreamsBuilder()
    departures = builder.stream("departures", key_serde="string", value_serde="json", name="departures")
    counts = departures.group_by_key().count(store="counts", name="count")
    counts.to_stream(name="changes").to("counts", key_serde="string", value_serde="long", name="out")
    return builder


def test_a_second_driver_on_the_same_state_dir_starts_from_empty_stores(tmp_path: Path) -> None:
    config = {"application.id": APP, "state.dir": str(tmp_path)}
    with TopologyTestDriver(per_carrier(), config) as first:
        first.create_input_topic("departures").pipe_input("UA", {"flight": 1})
        assert first.get_key_value_store("counts").get("UA") == 1
    with TopologyTestDriver(per_carrier(), config) as second:
        second.create_input_topic("departures").pipe_input("UA", {"flight": 2})
        assert second.create_output_topic("counts").read_key_values_to_list() == [("UA", 1)]
        assert second.get_key_value_store("counts").get("UA") == 1


def test_close_removes_the_application_state_but_keeps_the_given_state_dir(tmp_path: Path) -> None:
    (tmp_path / "other-app").mkdir()
    with TopologyTestDriver(per_carrier(), {"application.id": APP, "state.dir": str(tmp_path)}) as driver:
        driver.create_input_topic("departures").pipe_input("UA", {"flight": 1})
        assert (tmp_path / APP).is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-app"]


@pytest.mark.parametrize("state_dir", ["temporary", "given"])
def test_piping_records_does_not_fsync_per_record(
    state_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    config = {"application.id": APP} | ({"state.dir": str(tmp_path)} if state_dir == "given" else {})
    with TopologyTestDriver(per_carrier(), config) as driver:
        departures = driver.create_input_topic("departures")
        for index in range(50):
            departures.pipe_input("UA", {"flight": index})
        assert driver.get_key_value_store("counts").get("UA") == 50
        assert fsyncs == []


def test_an_invalid_config_leaves_no_state_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the driver's temporary state dir goes
    with pytest.raises(ConfigError, match=r"num\.stream\.threads"):
        TopologyTestDriver(per_carrier(), {"num.stream.threads": 0})
    assert list(tmp_path.iterdir()) == []
