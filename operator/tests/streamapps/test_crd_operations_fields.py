"""The CRD carries the operations fields (``upgradePolicy``, ``reset``, ``autoscaling`` and their status) in a form
``apiextensions.k8s.io/v1`` accepts: pydantic's numeric ``exclusiveMinimum`` (a ``gt`` bound) would make the API
server refuse the whole CRD, since OpenAPI v3 takes a boolean beside ``minimum``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamapp_operator.crdgen import structural_schema
from streamapp_operator.streamapps.resources import StreamAppSpec, StreamAppStatus


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_exclusive_bounds_are_openapi_v3_booleans_beside_their_minimum() -> None:
    spec = structural_schema(StreamAppSpec)
    target = spec["properties"]["autoscaling"]["properties"]["target"]["properties"]
    assert target["catchUpSeconds"]["exclusiveMinimum"] is True and target["catchUpSeconds"]["minimum"] == 0
    for schema in [spec, structural_schema(StreamAppStatus, keep_defaults=False)]:
        bounds = [n[k] for n in _walk(schema) for k in ("exclusiveMinimum", "exclusiveMaximum") if k in n]
        assert all(isinstance(b, bool) for b in bounds), bounds


def test_the_operations_fields_are_in_spec_and_status() -> None:
    spec = structural_schema(StreamAppSpec)["properties"]
    assert spec["upgradePolicy"]["enum"] == ["refuse", "newApplicationId", "reset"]
    assert spec["reset"]["required"] == ["nonce"]
    assert spec["autoscaling"]["required"] == ["maxReplicas", "target"]
    status = structural_schema(StreamAppStatus, keep_defaults=False)["properties"]
    assert {"reset", "autoscaling", "upgrade"} <= set(status)
    assert "step" in status["reset"]["properties"] and "recommendations" in status["autoscaling"]["properties"]
