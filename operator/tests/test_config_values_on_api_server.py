"""``spec.config`` on the local API server: the CRD admits unquoted numbers and booleans, stores them as JSON
numbers and booleans, and the operator's parse of what it stored renders them as strings; a list or an object,
which the CRD keeps untyped, is refused by the operator's parse (SpecInvalid) naming the key. Server-side dry runs
only: no StreamApp is stored, so no operator reconciles one.

Needs ``hack/stack/up.sh`` (the Kubernetes control plane)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml
from operator_fakes import UNQUOTED
from streamapp_operator.streamapps import validate
from streamapp_operator.streamapps.resources import StreamAppSpec
from test_operator_on_api_server import Kube, _streamapp, env, kube  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e


def _admitted(kube: Kube, manifest: dict[str, Any]) -> dict[str, Any]:  # noqa: F811
    """The object as the API server would store it (a server-side dry-run create)."""
    done = subprocess.run(
        ["kubectl", "create", "--dry-run=server", "-n", kube.namespace, "-o", "json", "-f", "-"],
        env=kube.env, input=yaml.safe_dump(manifest), capture_output=True, text=True, check=True,
    )  # fmt: skip
    stored: dict[str, Any] = json.loads(done.stdout)
    return stored


def test_unquoted_numbers_and_booleans_are_admitted_and_parsed_as_their_strings(kube: Kube) -> None:  # noqa: F811
    manifest = _streamapp("numbers", "numbers-in", "numbers")
    manifest["spec"]["config"] = yaml.safe_load(UNQUOTED)
    stored = _admitted(kube, manifest)["spec"]["config"]
    assert stored["commit.interval.ms"] == 1000 and stored["producer.enable.idempotence"] is True
    config = StreamAppSpec.parse(_admitted(kube, manifest)["spec"]).config
    assert config["commit.interval.ms"] == "1000" and config["producer.enable.idempotence"] == "true"
    assert config["producer.linger.ms"] == "0.5" and config["consumer.check.crcs"] == "false"


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}])
def test_a_list_or_an_object_the_crd_keeps_is_refused_by_the_operators_parse_naming_the_key(
    kube: Kube,  # noqa: F811
    value: Any,
) -> None:
    """The API server cannot check a value it keeps untyped (no CEL type for it): the operator's parse does."""
    manifest = _streamapp("refused", "refused-in", "refused")
    manifest["spec"]["config"] = {"commit.interval.ms": 1000, "bad": value}
    spec, problems = validate.parse_spec(_admitted(kube, manifest)["spec"], "refused")
    assert spec is None and problems[0].reason == "SpecInvalid"
    assert "config.bad: Value error, must be a string, a number or a boolean, got a" in problems[0].message
