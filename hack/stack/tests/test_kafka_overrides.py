"""The stack's broker runs the Kafka that versions.env pins on 9092/9093/9094 in .cache/run, unless the environment
names another version (``KAFKA_VERSION=4.1.1``, also through make) or other ports and run dir (a second broker
beside a running stack); the broker config it writes listens where the environment says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

STACK = Path(__file__).resolve().parents[1]
ROOT = STACK.parents[1]
PINNED = re.search(r"^KAFKA_VERSION=(\S+)$", (STACK / "versions.env").read_text(), re.M)
OVERRIDES = ("KAFKA_VERSION", "KAFKA_PORT", "KAFKA_CONTROLLER_PORT", "KAFKA_SASL_PORT", "STACK_RUN_DIR")


def sourced(script: str, **env: str) -> dict[str, str]:
    """``NAME=value`` lines a bash that sourced lib.sh and kafka.sh prints with ``script``, under ``env`` (the
    overrides of the calling environment removed first)."""
    base = {k: v for k, v in os.environ.items() if k not in OVERRIDES}
    done = subprocess.run(
        ["bash", "-c", f'. "{STACK}/lib.sh"; . "{STACK}/kafka.sh"; {script}'],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


NAMES = "KAFKA_VERSION KAFKA_BOOTSTRAP KAFKA_SASL_BOOTSTRAP RUN KAFKA_DATA KAFKA_HOME"
PRINT = f'for v in {NAMES}; do echo "$v=${{!v}}"; done'


def test_without_overrides_the_broker_is_the_pinned_kafka_on_the_default_ports_in_cache_run() -> None:
    assert PINNED
    got = sourced(PRINT)
    assert got["KAFKA_VERSION"] == PINNED.group(1)
    assert got["KAFKA_BOOTSTRAP"] == "127.0.0.1:9092"
    assert got["KAFKA_SASL_BOOTSTRAP"] == "127.0.0.1:9094"
    assert got["RUN"] == str(ROOT / ".cache" / "run")
    assert got["KAFKA_DATA"] == str(ROOT / ".cache" / "run" / f"kafka-{PINNED.group(1)}-data")
    assert got["KAFKA_HOME"] == str(ROOT / ".cache" / f"kafka-{PINNED.group(1)}")


def test_the_environment_moves_version_ports_and_run_dir_and_the_config_listens_there(tmp_path: Path) -> None:
    run = tmp_path / "run"
    got = sourced(
        f'{PRINT}; kafka_write_config; sed -n "s/^\\(listeners\\|controller.quorum.voters\\)=/&/p" "$KAFKA_CONF"',
        KAFKA_VERSION="4.1.1",
        KAFKA_PORT="19092",
        KAFKA_CONTROLLER_PORT="19093",
        KAFKA_SASL_PORT="19094",
        STACK_RUN_DIR=str(run),
    )
    assert got["KAFKA_VERSION"] == "4.1.1"
    assert got["KAFKA_BOOTSTRAP"] == "127.0.0.1:19092"
    assert got["RUN"] == str(run)
    assert got["KAFKA_DATA"] == str(run / "kafka-4.1.1-data")
    assert got["KAFKA_HOME"] == str(ROOT / ".cache" / "kafka-4.1.1")
    assert got["listeners"] == (
        "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,SASL_PLAINTEXT://127.0.0.1:19094"
    )
    assert got["controller.quorum.voters"] == "1@127.0.0.1:19093"


def test_kafka_version_from_the_environment_reaches_make_recipes_as_on_the_command_line(tmp_path: Path) -> None:
    """The Makefile includes versions.env, whose KAFKA_VERSION would otherwise replace the environment's and be
    exported to the recipes (GNU make exports variables that came from the environment with the makefile's value)."""
    probe = tmp_path / "probe.mk"
    probe.write_text("probe:\n\t@echo KAFKA_VERSION=$$KAFKA_VERSION\n")
    # not the outer make's flags either (`make test KAFKA_VERSION=…` passes its variables on in MAKEFLAGS)
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    base = {k: v for k, v in os.environ.items() if k not in OVERRIDES + outer}

    def recipe_sees(*args: str, **env: str) -> str:
        done = subprocess.run(
            ["make", "-s", "-C", str(ROOT), "-f", "Makefile", "-f", str(probe), "probe", *args],
            env={**base, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    assert recipe_sees(KAFKA_VERSION="4.1.1") == "KAFKA_VERSION=4.1.1"
    assert recipe_sees("KAFKA_VERSION=4.1.1") == "KAFKA_VERSION=4.1.1"
    assert recipe_sees() == "KAFKA_VERSION="  # not exported: the scripts read versions.env themselves
