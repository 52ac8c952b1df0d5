"""The suite's cost is visible after every run and its budget fails the run (``hack/ci/cost_report.py``).

Each test runs a small real pytest session (``pytester``, in a subprocess) with the plugin loaded as the
repository's root ``conftest.py`` loads it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

SUITE = {
    "fast/test_fast.py": """
        import pytest

        @pytest.fixture(scope="session")
        def slow_resource():
            import time
            time.sleep(0.3)
            return 1

        def test_one(slow_resource):
            assert slow_resource == 1

        def test_two(slow_resource):
            assert slow_resource == 1
    """,
    "waits/test_broker.py": """
        import time
        import pytest

        pytestmark = pytest.mark.integration

        def test_waits():
            time.sleep(0.4)
    """,
    "scenarios/test_scenario.py": """
        import pytest

        pytestmark = pytest.mark.e2e

        def test_a():
            pass

        def test_b():
            pass
    """,
}


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makeconftest('pytest_plugins = ["hack.ci.cost_report"]')
    pytester.makeini("[pytest]\nmarkers =\n  integration: broker\n  e2e: cluster\n")
    for path, source in SUITE.items():
        target = pytester.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(source))
    return pytester


def test_every_run_writes_junit_and_a_summary_by_kind_folder_fixture_and_slowest_test(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    summary = (suite.path / ".cache" / "ci" / "test-cost.txt").read_text()
    assert (suite.path / ".cache" / "ci" / "junit.xml").read_text().count("<testcase") == 5
    assert (_count(summary, "unit"), _count(summary, "broker"), _count(summary, "e2e")) == (2, 1, 2)
    assert _count(summary, "fast") == 2 and _count(summary, "waits") == 1 and _count(summary, "scenarios") == 2
    fixture = next(line.split() for line in summary.splitlines() if "slow_resource (session)" in line)
    assert fixture[-2] == "1" and float(fixture[-1]) >= 0.3  # set up once, its 0.3 s counted once
    slowest = summary.split("slowest ten tests:")[1]
    assert slowest.index("test_waits") < slowest.index("test_scenario.py::test_b")
    result.stdout.fnmatch_lines(["*where the time went*", "session wall time:*"])


def test_a_run_over_its_budget_fails_though_every_test_passed(suite: pytest.Pytester) -> None:
    over = suite.runpytest_subprocess("-p", "no:cacheprovider", "--time-budget=0.001")
    over.assert_outcomes(passed=5)
    assert over.ret == pytest.ExitCode.TESTS_FAILED
    over.stdout.fnmatch_lines(["*over its budget of 0.001 min*"])
    within = suite.runpytest_subprocess("-p", "no:cacheprovider", "--time-budget=5")
    assert within.ret == pytest.ExitCode.OK


def test_under_xdist_the_summary_counts_every_workers_tests_and_keeps_e2e_on_one_worker(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=5)
    summary = (suite.path / ".cache" / "ci" / "test-cost.txt").read_text()
    assert (_count(summary, "unit"), _count(summary, "broker"), _count(summary, "e2e")) == (2, 1, 2)
    workers = {line.split("[gw")[1][0] for line in result.outlines if "test_scenario.py::" in line and "[gw" in line}
    assert len(workers) == 1, result.outlines


def _count(summary: str, name: str) -> int:
    """The tests column of the summary row whose first column is ``name`` (a kind or a folder)."""
    rows = (line.split() for line in summary.splitlines())
    return int(next(cols[1] for cols in rows if len(cols) == 3 and cols[0] == name))
