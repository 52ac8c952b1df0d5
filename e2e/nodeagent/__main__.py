"""Command line: ``python -m e2e.nodeagent --kubeconfig FILE [--node-name N] [--mode venv|image]``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from e2e.nodeagent.agent import AgentConfig, NodeAgent


def parse_args(argv: list[str]) -> AgentConfig:
    defaults = AgentConfig(kubeconfig="")
    parser = argparse.ArgumentParser(prog="python -m e2e.nodeagent", description=__doc__)
    parser.add_argument(
        "--kubeconfig", default=os.environ.get("KUBECONFIG", ""), help="admin kubeconfig (default: $KUBECONFIG)"
    )
    parser.add_argument("--node-name", default=defaults.node_name)
    parser.add_argument(
        "--mode",
        choices=["venv", "image"],
        default=defaults.mode,
        help="venv: run commands on the host with the workspace venv; image: buildah run in the image",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=defaults.run_dir,
        help="state folder: pods/ (logs, pid files, volume files), volumes/ (PV data)",
    )
    parser.add_argument("--venv", type=Path, default=defaults.venv, help="venv whose bin/ leads PATH (venv mode)")
    parser.add_argument("--ca-file", type=Path, default=None, help="cluster CA (default: <run-dir>/pki/ca.crt)")
    parser.add_argument("--api-port", type=int, default=defaults.api_port)
    args = parser.parse_args(argv)
    if not args.kubeconfig:
        parser.error("--kubeconfig (or $KUBECONFIG) is required")
    return AgentConfig(
        kubeconfig=args.kubeconfig,
        node_name=args.node_name,
        mode=args.mode,
        run_dir=args.run_dir.resolve(),
        venv=args.venv.resolve(),
        ca_file=args.ca_file,
        api_port=args.api_port,
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    NodeAgent(parse_args(sys.argv[1:] if argv is None else argv)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
