"""The repository's root conftest: loads the plugin that reports where the suite's time goes and enforces its
budget (``hack/ci/cost_report.py``, docs/ci.md) for every pytest run under this folder."""

pytest_plugins = ["hack.ci.cost_report", "pytester"]
