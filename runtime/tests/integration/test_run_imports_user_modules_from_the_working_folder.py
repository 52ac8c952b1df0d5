"""``streamapp run`` started in a folder with the user's modules runs their functions in its stream threads: the
worker processes it spawns import ``module:function`` references from the working folder (not only the CLI
process, which ``runtime/tests/test_cli.py`` checks against a fake runtime), whether the topology is a builder
function of that module or a description file that names its functions."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from streamapp_harness import STREAMAPP, KafkaTestClient, StreamAppInstance, unique, wait_for

pytestmark = pytest.mark.integration

USER_MODULE = """\
import os

from streamapp import StreamsBuilder


def tag(value):
    return {{"value": value, "mapped_by": os.getpid()}}


def build():
    builder = StreamsBuilder()
    (
        builder.stream("{source}", key_serde="string", value_serde="json", name="in")
        .map_values(tag, name="tag")
        .to("{output}", name="out")
    )
    return builder
"""


class WorkingFolderInstance(StreamAppInstance):
    """``streamapp run --topology REF`` started in ``workdir``, which is not on its PYTHONPATH."""

    def __init__(self, workdir: Path, topology_ref: str, topology: dict[str, Any], config: dict[str, Any]) -> None:
        super().__init__(workdir, topology, config)
        self.topology_ref = topology_ref

    def start(self) -> WorkingFolderInstance:
        env = {**os.environ, "STREAMAPP_HTTP_HOST": "127.0.0.1"}
        env.pop("PYTHONPATH", None)
        env.pop("STREAMAPP_INSTANCE_ID", None)
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                [str(STREAMAPP), "run", "--topology", self.topology_ref, "--config", self.config_file.name],
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        return self


@pytest.mark.parametrize("form", ["module:function", "topology file"])
def test_the_stream_thread_workers_of_run_import_user_functions_from_the_working_folder(
    form: str, kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    source, output, module = unique("wf-in"), unique("wf-out"), f"wf_app_{uuid.uuid4().hex[:8]}"
    assert find_spec(module) is None  # importable only from the working folder
    kafka.create_topics({source: 1, output: 1})
    (workdir / f"{module}.py").write_text(USER_MODULE.format(source=source, output=output))
    serdes = {"keySerde": "string", "valueSerde": "json"}
    topology = {
        "nodes": [
            {"name": "in", "type": "source", "topics": [source], **serdes},
            {"name": "tag", "type": "map_values", "input": "in", "mapper": f"{module}:tag"},
            {"name": "out", "type": "sink", "input": "tag", "topic": output, **serdes},
        ]
    }
    ref = f"{module}:build" if form == "module:function" else "topology.yaml"
    config = {"application.id": unique("wf-app"), "bootstrap.servers": kafka.bootstrap, "state.dir": "state"}
    instance = WorkingFolderInstance(workdir, ref, topology, config)
    instances.append(instance.start())
    instance.wait_ready()

    kafka.produce(source, [("k", 41)])
    wait_for(lambda: sum(kafka.end_offsets(output).values()) > 0, 60, f"the mapped record on {output}")

    ((_, _, key, value),) = kafka.read_all(output)
    mapped = json.loads(value or b"null")
    assert key == b"k" and mapped["value"] == 41
    assert mapped["mapped_by"] in instance.worker_pids()  # a spawned stream-thread worker ran the user function
    assert instance.process is not None and mapped["mapped_by"] != instance.process.pid
    assert instance.stop() == 0
