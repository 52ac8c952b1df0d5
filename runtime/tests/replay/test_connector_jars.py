"""The replay's SparkSession takes Spark's Kafka connector from local jars and never downloads it: missing jars
fail ``build_session`` with ``ConnectorJarsMissingError`` naming the jar, the Spark version and the folder
looked in, before any SparkSession starts (``streamapp.replay.session``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyspark
import pytest
from streamapp.replay import session
from streamapp.replay.session import CONNECTOR_JARS, ConnectorJarsMissingError, build_session, connector_jars

VERSION = pyspark.__version__


def _jar_names(version: str = VERSION) -> list[str]:
    """File names of the connector jars for Spark ``version`` (the non-Spark ones at versions of their own)."""
    return [f"{a}-{version if a.startswith('spark-') else '1.0.0'}.jar" for a in CONNECTOR_JARS]


def _folder(path: Path, names: list[str]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in names:
        (path / name).write_bytes(b"")
    return path


class _Builder:
    """``SparkSession.builder`` recording its settings; starting a session fails the test."""

    def __init__(self) -> None:
        self.settings: dict[str, str] = {}

    def master(self, master: str) -> _Builder:
        return self

    def appName(self, name: str) -> _Builder:
        return self

    def config(self, key: str, value: str) -> _Builder:
        self.settings[key] = value
        return self

    def getOrCreate(self) -> Any:
        if "spark.jars" not in self.settings:
            raise AssertionError("a SparkSession started without the connector jars")
        return self.settings


@pytest.fixture
def builder(monkeypatch: pytest.MonkeyPatch) -> _Builder:
    fake = _Builder()
    monkeypatch.setattr(session, "SparkSession", type("SparkSession", (), {"builder": fake}))
    monkeypatch.delenv("STREAMAPP_SPARK_JARS", raising=False)
    return fake


def test_missing_connector_jars_fail_naming_the_jar_the_version_and_the_folder(
    tmp_path: Path, builder: _Builder
) -> None:
    empty = _folder(tmp_path / "jars", [])
    with pytest.raises(ConnectorJarsMissingError) as raised:
        build_session("local[1]", jars_folder=empty)
    message = str(raised.value)
    assert f"spark-sql-kafka-0-10_2.13 (for Spark {VERSION}) not found in {empty}" in message
    assert "hack/stack/spark.sh" in message and "STREAMAPP_SPARK_JARS" in message
    assert builder.settings == {}  # nothing configured, no session started


def test_a_folder_that_does_not_exist_is_named(tmp_path: Path, builder: _Builder) -> None:
    with pytest.raises(ConnectorJarsMissingError, match=re.escape(f"not found in {tmp_path / 'nowhere'}")):
        build_session(jars_folder=tmp_path / "nowhere")


def test_connector_jars_of_another_spark_version_are_missing_ones(tmp_path: Path) -> None:
    other = _folder(tmp_path / "jars", _jar_names("3.5.0"))
    with pytest.raises(ConnectorJarsMissingError, match=f"for Spark {VERSION}"):
        connector_jars(other)


def test_the_one_jar_missing_is_named(tmp_path: Path) -> None:
    names = [n for n in _jar_names() if not n.startswith("commons-pool2")]
    with pytest.raises(ConnectorJarsMissingError, match="commons-pool2 "):
        connector_jars(_folder(tmp_path / "jars", names))


def test_the_session_gets_the_local_jars_and_nothing_to_download(tmp_path: Path, builder: _Builder) -> None:
    folder = _folder(tmp_path / "jars", _jar_names())
    build_session("local[1]", jars_folder=folder)
    assert builder.settings["spark.jars"].split(",") == [str(folder / n) for n in _jar_names()]
    assert not {k for k in builder.settings if k.startswith(("spark.jars.packages", "spark.jars.repositories"))}


def test_without_a_folder_the_jars_come_from_streamapp_spark_jars(
    tmp_path: Path, builder: _Builder, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = _folder(tmp_path / "baked", [])
    monkeypatch.setenv("STREAMAPP_SPARK_JARS", str(empty))
    with pytest.raises(ConnectorJarsMissingError, match=re.escape(f"not found in {empty}")):
        build_session()
    folder = _folder(tmp_path / "baked", _jar_names())
    assert connector_jars() == [str(folder / n) for n in _jar_names()]
