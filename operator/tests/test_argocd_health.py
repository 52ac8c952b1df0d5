"""The Argo CD health check the chart ships (``charts/streamapp-operator/argocd/health.lua``) gives every sample
StreamApp the health its ``health_test.yaml`` names, run the way Argo CD runs it.

Argo CD's own test (``util/lua``: ``TestLuaHealthScript``) walks ``resource_customizations/<group>/<kind>/``,
runs ``health.lua`` on each ``inputPath`` of ``health_test.yaml`` with the object as the global ``obj`` and
compares the returned table with ``healthStatus`` (``status`` and ``message``; a missing message is ""). This
test does the same with a real Lua 5.1 interpreter (``lupa``; Argo CD embeds gopher-lua, a Lua 5.1), with
only the libraries Argo CD opens outside its tests (base, table, package; no ``string``, ``math``, ``io``),
so a script that needs more fails here as it would in Argo CD.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51

ROOT = Path(__file__).resolve().parents[2]
ARGOCD = ROOT / "charts" / "streamapp-operator" / "argocd"
HEALTH_LUA = ARGOCD / "health.lua"
#: Argo CD's health codes; anything else is reported as Unknown ("Lua returned an invalid health status").
HEALTH_CODES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}
#: The argocd-cm key Argo CD reads the health check of streamapp.io/StreamApp from.
ARGOCD_CM_KEY = "resource.customizations.health.streamapp.io_StreamApp"


def run_health_check(script: str, obj: dict[str, Any]) -> dict[str, str]:
    """``{"status", "message"}`` of ``script`` for ``obj``, as Argo CD's ``ExecuteHealthLua`` returns it."""
    lua = lua51.LuaRuntime(register_eval=False, register_builtins=False, unpack_returned_tuples=False)
    # What Argo CD's VM does not open outside tests: the string library (also as methods on strings), math,
    # io, os (it opens a "safe" os with time functions only, which a health check has no use for), debug.
    lua.execute(
        """
        debug.setmetatable("", nil)
        string, math, io, os, debug, coroutine = nil, nil, nil, nil, nil, nil
        """
    )
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(script)
    assert lua.eval("type")(result) == "table", f"health.lua returned {result!r}, not a table"
    health = {"status": result["status"] or "", "message": result["message"] or ""}
    if health["status"] not in HEALTH_CODES:
        return {"status": "Unknown", "message": "Lua returned an invalid health status"}
    return health


def _test_cases() -> list[tuple[str, dict[str, str]]]:
    tests = yaml.safe_load((ARGOCD / "health_test.yaml").read_text())["tests"]
    return [(t["inputPath"], {"status": "", "message": "", **t["healthStatus"]}) for t in tests]


@pytest.mark.parametrize(("input_path", "expected"), _test_cases(), ids=[path for path, _ in _test_cases()])
def test_health_of_sample_streamapp(input_path: str, expected: dict[str, str]) -> None:
    obj = yaml.safe_load((ARGOCD / input_path).read_text())
    assert run_health_check(HEALTH_LUA.read_text(), obj) == expected


def test_every_sample_is_in_health_test_yaml() -> None:
    listed = {path for path, _ in _test_cases()}
    samples = {f"testdata/{p.name}" for p in (ARGOCD / "testdata").glob("*.yaml")}
    assert samples == listed


def test_samples_cover_every_health_status_the_check_gives() -> None:
    statuses = {expected["status"] for _, expected in _test_cases()}
    assert statuses == {"Healthy", "Progressing", "Degraded", "Suspended"}


def test_samples_use_the_operators_condition_reasons() -> None:
    """The samples' Degraded reasons are reasons the operator really writes (not made up for the test)."""
    sources = "\n".join(p.read_text() for p in (ROOT / "operator" / "src" / "streamapp_operator").rglob("*.py"))
    for input_path, _ in _test_cases():
        conditions = (yaml.safe_load((ARGOCD / input_path).read_text()).get("status") or {}).get("conditions", [])
        for reason in (condition["reason"] for condition in conditions):
            assert f'"{reason}"' in sources, f"{input_path}: the operator never writes reason {reason}"


def test_health_check_fails_here_when_it_uses_a_library_argo_cd_does_not_open() -> None:
    """The sandbox is real: ``string.format`` (or ``("x"):upper()``) is an error, as in Argo CD."""
    obj = yaml.safe_load((ARGOCD / "testdata" / "healthy.yaml").read_text())
    for script in ('return {status = string.format("%s", "Healthy")}', 'return {status = ("Healthy"):upper()}'):
        with pytest.raises(lua51.LuaError):
            run_health_check(script, obj)


def test_a_stale_status_is_progressing_whatever_its_conditions_say() -> None:
    """A Degraded (or Ready) condition of an older generation says nothing about the current spec."""
    obj = yaml.safe_load((ARGOCD / "testdata" / "degraded_podsFailing.yaml").read_text())
    obj["metadata"]["generation"] = obj["status"]["observedGeneration"] + 1
    assert run_health_check(HEALTH_LUA.read_text(), obj)["status"] == "Progressing"


def test_argocd_cm_patch_carries_the_tested_health_check() -> None:
    patch = yaml.safe_load((ARGOCD / "argocd-cm-patch.yaml").read_text())
    assert patch["data"][ARGOCD_CM_KEY] == HEALTH_LUA.read_text()
