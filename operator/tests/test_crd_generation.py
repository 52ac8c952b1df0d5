"""The CRD has one source, the typed models: crds/ and the chart's copy are exactly what they generate,
and the generated schema is structural, with the defaults, validation and subresources the contract needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from streamapp_operator import crdgen

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return crdgen.build_crd()


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("relative", crdgen.DEFAULT_OUTPUTS, ids=str)
def test_committed_crd_files_match_the_models(relative: Path) -> None:
    path = ROOT / relative
    assert path.read_text() == crdgen.render(), f"{relative} drifted from the models: run `make crds`"


def test_check_mode_fails_on_drift_and_writes_nothing(tmp_path: Path) -> None:
    assert crdgen.main(["--root", str(tmp_path)]) == 0
    for relative in crdgen.DEFAULT_OUTPUTS:
        assert (tmp_path / relative).read_text() == crdgen.render()
    assert crdgen.main(["--root", str(tmp_path), "--check"]) == 0
    chart_copy = tmp_path / crdgen.DEFAULT_OUTPUTS[1]
    chart_copy.write_text(chart_copy.read_text().replace("shortNames", "shortNamez"))
    assert crdgen.main(["--root", str(tmp_path), "--check"]) == 1
    assert "shortNamez" in chart_copy.read_text()


def test_schema_is_structural(crd: dict[str, Any]) -> None:
    """Every node has a type (or is int-or-string / preserves unknown fields); no $ref, no nullable unions."""

    def walk(node: dict[str, Any], path: str) -> None:
        assert "$ref" not in node and "title" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert [choice["type"] for choice in node["anyOf"]] == ["integer", "string"], path
            return
        if node == {"x-kubernetes-preserve-unknown-fields": True}:  # any value (spec.config's: scalars, parsed)
            return
        assert "type" in node, path
        assert "anyOf" not in node, path
        assert node.get("additionalProperties") is not False, path
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}[*]")
        if "items" in node:
            walk(node["items"], f"{path}[]")

    walk(_schema(crd), "")


def test_spec_defaults_and_validation(crd: dict[str, Any]) -> None:
    spec = _schema(crd)["properties"]["spec"]
    props = spec["properties"]
    assert spec["required"] == ["image", "kafka", "topology"]
    assert (props["replicas"]["default"], props["replicas"]["minimum"]) == (1, 0)
    assert (props["threads"]["default"], props["threads"]["minimum"]) == (1, 1)
    assert props["processingGuarantee"]["enum"] == ["at_least_once", "exactly_once_v2"]
    assert props["processingGuarantee"]["default"] == "at_least_once"
    assert props["kafka"]["required"] == ["bootstrapServers"]
    assert props["state"]["default"] == {}
    assert props["state"]["properties"]["size"]["default"] == "1Gi"
    # numbers and booleans too: the operator's parse keeps each as its string (test_config_values.py)
    assert props["config"]["additionalProperties"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert props["applicationId"]["pattern"] == "^[a-zA-Z0-9._-]+$"
    node = props["topology"]["properties"]["nodes"]["items"]
    assert node["required"] == ["name", "type"]
    assert node["x-kubernetes-preserve-unknown-fields"] is True
    assert node["properties"]["name"]["pattern"] == "^[a-zA-Z0-9._-]+$"


def test_disruption_budget_schema_defaults_to_enabled_and_rejects_zero_and_both_bounds(crd: dict[str, Any]) -> None:
    budget = _schema(crd)["properties"]["spec"]["properties"]["disruptionBudget"]
    assert budget["default"] == {}
    props = budget["properties"]
    assert props["enabled"] == {**props["enabled"], "type": "boolean", "default": True}
    for bound in ("maxUnavailable", "minAvailable"):
        assert (props[bound]["type"], props[bound]["minimum"]) == ("integer", 1)
        assert "default" not in props[bound]  # the operator's default (1) must not collide with minAvailable
    assert budget["x-kubernetes-validations"] == [
        {"rule": "!(has(self.maxUnavailable) && has(self.minAvailable))",
         "message": "set either maxUnavailable or minAvailable, not both"},
    ]  # fmt: skip


def test_status_has_conditions_as_a_map_and_no_defaults(crd: dict[str, Any]) -> None:
    status = _schema(crd)["properties"]["status"]
    assert "default" not in yaml.safe_dump(status)
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert set(status["properties"]) >= {
        "observedGeneration", "conditions", "replicas", "readyReplicas", "ready", "selector",
        "tasks", "lag", "consumerGroupState", "disruptionBudget", "restoreRemaining",
    }  # fmt: skip


def test_scale_subresource_maps_replicas_and_selector(crd: dict[str, Any]) -> None:
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }


def test_printer_columns_show_ready_lag_and_age(crd: dict[str, Any]) -> None:
    columns = {c["name"]: c["jsonPath"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns == {
        "Ready": ".status.ready",
        "Threads": ".spec.threads",
        "Tasks": ".status.tasks",
        "Lag": ".status.lag",
        "Restore": ".status.restoreProgress",
        "Age": ".metadata.creationTimestamp",
    }


def test_names_group_and_short_name(crd: dict[str, Any]) -> None:
    assert crd["metadata"]["name"] == "streamapps.streamapp.io"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == ("StreamApp", "streamapps", ["sa", "sapp"])
    assert crd["spec"]["scope"] == "Namespaced"
