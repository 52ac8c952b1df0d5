"""Where the test suite's time goes: a pytest plugin loaded by the repository's root ``conftest.py``.

Every run, serial or under pytest-xdist, writes

- a JUnit XML (``--junitxml``; ``.cache/ci/junit.xml`` when not given), each test's fixture set-up times among its
  properties, and
- a summary (``--cost-report``; ``.cache/ci/test-cost.txt`` when not given): the session's wall time, test seconds
  per kind (unit, broker, spark, e2e), per folder and per fixture (set-up seconds and how many set-ups), and the
  slowest ten tests. It is printed at the end of the run too.

``.cache/`` is git-ignored. Test seconds are summed over a test's set-up, call and teardown; under xdist they add up
over the workers, so their sum exceeds the wall time. A fixture's seconds are its set-up only (its teardown is in
its tests' teardown seconds).

``--time-budget=MINUTES`` makes the run fail when the session's wall time exceeds the budget, even if every test
passed, so the change that blows the budget is seen in the run it makes fail. The Makefile's ``test`` target sets it
from ``TEST_BUDGET_MINUTES``, the one place the budget is written.

Kinds: ``e2e`` (marker ``e2e``), ``spark`` (a Spark replay: the conformance ``engine`` parameter ``spark`` or the
``spark_session`` fixture), ``broker`` (marker ``integration``), ``unit`` (the rest). Under xdist the plugin also
keeps the tests that must share one process together (``xdist_group``; see ``worker_group``).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

_FIXTURES = "fixture_setup_seconds"
_KIND = "kind"
_CURRENT_ITEM = pytest.StashKey[pytest.Item]()
_GROUPS_FILE = "STREAMAPP_XDIST_GROUPS"
"""Environment variable naming the file where xdist workers leave each grouped test's group for the scheduler."""
_RECORDED_FIXTURE_SECONDS = 0.01
"""Fixture set-ups shorter than this are left out of the report (and the JUnit XML's properties)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cost report", "where the suite's time goes (hack/ci/cost_report.py)")
    group.addoption("--cost-report", metavar="PATH", help="summary file (default: <rootdir>/.cache/ci/test-cost.txt)")
    group.addoption(
        "--time-budget", metavar="MINUTES", type=float, help="fail the run when its wall time exceeds this budget"
    )


def kind_of(item: pytest.Item) -> str:
    """``e2e``, ``spark``, ``broker`` or ``unit`` for one collected test (see the module docstring)."""
    if item.get_closest_marker("e2e"):
        return "e2e"
    callspec = getattr(item, "callspec", None)
    uses_spark = "spark_session" in getattr(item, "fixturenames", ()) or (
        callspec is not None and callspec.params.get("engine") == "spark"
    )
    if uses_spark:
        return "spark"
    if item.get_closest_marker("integration"):
        return "broker"
    return "unit"


def worker_group(kind: str) -> str | None:
    """The xdist group a test of this kind runs in, or None when any worker may take it.

    - ``spark``: one worker, so the suite starts one SparkSession (a JVM of 1 GiB, 10-20 s) and not one per worker;
    - ``e2e``: one worker, in file order: the scenarios share the cluster's one operator Deployment, and some
      restart it, kill its pods or re-install the chart, which a scenario running beside them would see.

    Unit and broker tests isolate themselves (their own topics, application ids, state dirs and HTTP ports).
    """
    return kind if kind in ("spark", "e2e") else None


def pytest_configure(config: pytest.Config) -> None:
    root = Path(str(config.rootpath))
    if getattr(config.option, "xmlpath", None) is None and not hasattr(config, "workerinput"):
        config.option.xmlpath = str(root / ".cache" / "ci" / "junit.xml")
        Path(config.option.xmlpath).parent.mkdir(parents=True, exist_ok=True)
    if not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") == "loadgroup":
        # set before the workers start, which inherit it
        os.environ[_GROUPS_FILE] = str(Path(tempfile.mkdtemp(prefix="xdist-groups-")) / "groups.json")
    config.pluginmanager.register(_CostCollector(config), "cost-collector")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    for item in items:
        kind = kind_of(item)
        item.user_properties.append((_KIND, kind))
        names = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
        )
        group = "_".join(names) or worker_group(kind)
        if group is not None:
            groups[item.nodeid] = group
    target = os.environ.get(_GROUPS_FILE)
    if target and hasattr(config, "workerinput"):
        tmp = Path(f"{target}.{config.workerinput['workerid']}")
        tmp.write_text(json.dumps(groups))
        tmp.replace(target)  # every worker collects the same tests: any one's file will do


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` as pytest-xdist documents it, working with pytest 9.2.

    pytest-xdist 3.8 groups by a suffix it writes into ``item._nodeid``, which pytest 9.2 no longer reads (a node id
    is ``item._id``), so its ``loadgroup`` quietly spreads a group over the workers. This scheduler takes each test's
    group from a file the workers write at collection (``xdist_group`` marks, else ``worker_group``); a test in no
    group goes with its module (module-scoped fixtures are set up once, and a module's tests keep their order). The
    units go out largest first, each to one worker, the next to whichever worker is free.
    """
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    path = Path(os.environ[_GROUPS_FILE])

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                self._groups = json.loads(path.read_text())
            return self._groups.get(nodeid) or nodeid.split("::", 1)[0]

    return GroupScheduling(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    item.config.stash[_CURRENT_ITEM] = item
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest) -> Generator:
    started = time.perf_counter()
    yield
    item = request.config.stash.get(_CURRENT_ITEM, None)
    seconds = round(time.perf_counter() - started, 3)
    if item is not None and seconds >= _RECORDED_FIXTURE_SECONDS:
        item.user_properties.append((_FIXTURES, json.dumps([fixturedef.argname, fixturedef.scope, seconds])))


@dataclass
class _Totals:
    tests: int = 0
    seconds: float = 0.0

    def add(self, seconds: float, *, new_test: bool) -> None:
        self.tests += int(new_test)
        self.seconds += seconds


@dataclass
class Summary:
    """The aggregates of one session, fed report by report (``add_report``), rendered by ``render``."""

    wall_seconds: float = 0.0
    by_kind: dict[str, _Totals] = field(default_factory=lambda: defaultdict(_Totals))
    by_folder: dict[str, _Totals] = field(default_factory=lambda: defaultdict(_Totals))
    by_fixture: dict[tuple[str, str], _Totals] = field(default_factory=lambda: defaultdict(_Totals))
    by_test: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add_report(self, report: pytest.TestReport) -> None:
        props = dict(p for p in report.user_properties if p[0] == _KIND)
        kind = str(props.get(_KIND, "unit"))
        path = report.nodeid.split("::", 1)[0]
        folder = path.rsplit("/", 1)[0] if "/" in path else "."
        new_test = report.when == "setup"
        self.by_kind[kind].add(report.duration, new_test=new_test)
        self.by_folder[folder].add(report.duration, new_test=new_test)
        self.by_test[report.nodeid] += report.duration
        if report.when == "setup":
            for name, value in report.user_properties:
                if name == _FIXTURES:
                    fixture, scope, seconds = json.loads(str(value))
                    self.by_fixture[(fixture, scope)].add(float(seconds), new_test=True)

    def render(self, budget_minutes: float | None = None) -> str:
        lines = [f"session wall time: {_clock(self.wall_seconds)}"]
        if budget_minutes is not None:
            verdict = "OVER" if self.over_budget(budget_minutes) else "within"
            lines[0] += f" ({verdict} the budget of {budget_minutes:g} min)"
        lines += ["", "test seconds by kind (set-up + call + teardown; summed over xdist workers):"]
        lines += _table(("kind", "tests", "seconds"), _rows(self.by_kind))
        lines += ["", "test seconds by folder:"]
        lines += _table(("folder", "tests", "seconds"), _rows(self.by_folder))
        lines += ["", "fixture set-up seconds (the fifteen costliest):"]
        fixtures = {f"{name} ({scope})": t for (name, scope), t in self.by_fixture.items()}
        lines += _table(("fixture (scope)", "set-ups", "seconds"), _rows(fixtures)[:15])
        lines += ["", "slowest ten tests:"]
        slowest = sorted(self.by_test.items(), key=lambda kv: -kv[1])[:10]
        lines += _table(("test", "seconds"), [(nodeid, f"{s:.1f}") for nodeid, s in slowest])
        return "\n".join(lines) + "\n"

    def over_budget(self, budget_minutes: float) -> bool:
        return self.wall_seconds > budget_minutes * 60


def _rows(totals: dict[str, _Totals]) -> list[tuple[str, ...]]:
    ordered = sorted(totals.items(), key=lambda kv: -kv[1].seconds)
    return [(name, str(t.tests), f"{t.seconds:.1f}") for name, t in ordered]


def _table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> list[str]:
    rows = [header, *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s ({seconds:.0f} s)"


class _CostCollector:
    """Aggregates the reports of the controlling process (the only one under xdist that sees them all)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.summary = Summary()
        self.started = time.monotonic()
        self.active = not hasattr(config, "workerinput")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.active:
            self.summary.add_report(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.active:
            return
        self.summary.wall_seconds = time.monotonic() - self.started
        budget = self.config.getoption("time_budget")
        path = Path(self.config.getoption("cost_report") or Path(str(self.config.rootpath)) / ".cache/ci/test-cost.txt")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.text = self.summary.render(budget)
        path.write_text(self.text)
        self.path = path
        if budget is not None and self.summary.over_budget(budget) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.active or not hasattr(self, "text"):
            return
        terminalreporter.section("where the time went (hack/ci/cost_report.py)")
        terminalreporter.write(self.text)
        terminalreporter.write_line(f"written to {self.path}")
        budget = self.config.getoption("time_budget")
        if budget is not None and self.summary.over_budget(budget):
            terminalreporter.write_line(
                f"FAILED: the suite took {_clock(self.summary.wall_seconds)}, over its budget of {budget:g} min "
                "(TEST_BUDGET_MINUTES in the Makefile): make it faster before adding to it",
                red=True,
                bold=True,
            )
