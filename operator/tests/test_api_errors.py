"""An API-server error on a write is a rejection the StreamApp's status names (4xx and 500: the request itself is
wrong, retrying the same object cannot help) or an unavailability retried at the timer (408, 409, 429, 5xx other
than 500). ``k8s._translate`` is the one place that decides; ``test_invalid_spec`` covers it on the API server."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException
from streamapp_operator.k8s import ApplyRejected, KubernetesUnavailable, _translate


def _error(status: int, message: str = "spec.replicas: Invalid value") -> ApiException:
    exc = ApiException(status=status, reason="Reason Phrase")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


@pytest.mark.parametrize("status", [400, 403, 404, 410, 422, 500])
def test_a_rejected_write_names_the_api_servers_message(status: int) -> None:
    translated = _translate(_error(status), "applying StatefulSet apps/orders")
    assert isinstance(translated, ApplyRejected)
    assert str(translated) == "applying StatefulSet apps/orders: spec.replicas: Invalid value"


@pytest.mark.parametrize("status", [408, 409, 429, 502, 503, 504])
def test_a_write_that_may_heal_is_an_unavailability_with_its_status(status: int) -> None:
    translated = _translate(_error(status, "etcdserver: request timed out"), "applying Service apps/orders")
    assert isinstance(translated, KubernetesUnavailable)
    assert str(translated) == f"applying Service apps/orders: HTTP {status} etcdserver: request timed out"


def test_an_error_without_a_status_body_falls_back_to_the_reason_phrase() -> None:
    exc = ApiException(status=422, reason="Unprocessable Entity")
    exc.body = "<html>proxy error</html>"
    translated = _translate(exc, "applying ConfigMap apps/orders")
    assert str(translated) == "applying ConfigMap apps/orders: Unprocessable Entity"
