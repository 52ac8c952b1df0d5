"""Env resolution and $(VAR) expansion follow the kubelet's rules."""

from __future__ import annotations

import base64

import pytest

from e2e.nodeagent.envvars import EnvResolutionError, PodFacts, container_argv, expand, resolve_env

POD = PodFacts(
    name="web-0",
    namespace="demo",
    uid="u-1",
    node_name="streamapp-node-0",
    pod_ip="127.0.100.7",
    host_ip="127.0.0.1",
    service_account="default",
    labels={"app": "web"},
    annotations={},
)
CONFIG = {"settings": {"data": {"mode": "fast", "level": "3"}}}
SECRETS = {"creds": {"data": {"password": base64.b64encode(b"s3cret").decode()}}}


def resolve(container: dict, base: dict | None = None) -> dict[str, str]:
    return resolve_env(container, POD, CONFIG.get, SECRETS.get, base or {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)-$(B)", "1-2"),
        ("$$(A)", "$(A)"),  # escaped reference stays literal
        ("$(MISSING)", "$(MISSING)"),  # unknown reference is kept verbatim
        ("$(A", "$(A"),  # unclosed reference is kept
        ("cost: $5", "cost: $5"),
        ("trailing $", "trailing $"),
        ("$$$(A)", "$1"),
    ],
)
def test_expand_matches_kubelet_semantics(text: str, expected: str) -> None:
    assert expand(text, {"A": "1", "B": "2"}) == expected


def test_env_values_may_reference_earlier_variables_only() -> None:
    env = resolve(
        {
            "env": [
                {"name": "LATER_REF", "value": "$(SECOND)"},
                {"name": "FIRST", "value": "one"},
                {"name": "SECOND", "value": "$(FIRST)-two"},
            ]
        }
    )
    assert env["SECOND"] == "one-two"
    assert env["LATER_REF"] == "$(SECOND)"


def test_downward_api_fields_resolve_from_pod_facts() -> None:
    env = resolve(
        {
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            ]
        }
    )
    assert (env["POD_NAME"], env["POD_NAMESPACE"], env["POD_IP"], env["NODE"], env["APP"]) == (
        "web-0",
        "demo",
        "127.0.100.7",
        "streamapp-node-0",
        "web",
    )


def test_config_map_and_secret_key_refs_resolve_and_decode() -> None:
    env = resolve(
        {
            "env": [
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "x", "optional": True}}},
            ]
        }
    )
    assert env["MODE"] == "fast"
    assert env["PASSWORD"] == "s3cret"
    assert "OPT" not in env


def test_missing_required_key_is_a_config_error() -> None:
    with pytest.raises(EnvResolutionError, match="key 'nope' not found in configMap 'settings'"):
        resolve({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "nope"}}}]})
    with pytest.raises(EnvResolutionError, match="secret 'absent' not found"):
        resolve({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]})


def test_env_from_applies_prefix_and_env_overrides_it_and_base() -> None:
    env = resolve(
        {
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
            "env": [{"name": "CFG_mode", "value": "slow"}, {"name": "PATH", "value": "/x:$(PATH)"}],
        },
        base={"PATH": "/venv/bin"},
    )
    assert env["CFG_level"] == "3"
    assert env["CFG_mode"] == "slow"
    assert env["PATH"] == "/x:/venv/bin"


def test_argv_expands_command_and_args_with_the_container_env() -> None:
    container = {"command": ["python", "-m", "http.server"], "args": ["--bind", "$(POD_IP)", "$$(KEEP)"]}
    assert container_argv(container, {"POD_IP": "127.0.100.7"}) == [
        "python",
        "-m",
        "http.server",
        "--bind",
        "127.0.100.7",
        "$(KEEP)",
    ]


def test_argv_falls_back_to_image_entrypoint_and_cmd_like_kubernetes() -> None:
    assert container_argv({}, {}, ["tini", "--"], ["serve"]) == ["tini", "--", "serve"]
    assert container_argv({"args": ["run"]}, {}, ["tini", "--"], ["serve"]) == ["tini", "--", "run"]
    assert container_argv({"command": ["sh"]}, {}, ["tini", "--"], ["serve"]) == ["sh"]
