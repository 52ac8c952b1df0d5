"""Restore progress per store: records restored, remaining, rate (the pod's, else between two looks), estimated
time left; pods of an older runtime that report per task only still get an entry per task; the list is capped."""

from __future__ import annotations

from operator_fakes import TestingCluster, TestingInstances, TestingKafka, flights_spec
from streamapp_operator.crdgen import structural_schema
from streamapp_operator.streamapps.pod_status import RestoreView, RestoringStore, RestoringTask, restore_view
from streamapp_operator.streamapps.reconcile import App, World, reconcile
from streamapp_operator.streamapps.resources import MAX_RESTORE_ENTRIES, StreamAppStatus
from streamapp_operator.streamapps.restore_progress import restore_progress, summary

STORES = {0: [], 1: ["departures-per-carrier-store"]}


def test_the_first_look_has_counts_and_no_rate_the_second_a_rate_and_time_left() -> None:
    first = restore_progress(
        RestoreView((RestoringTask("app-0", "1_0", remaining=9000, restored=1000),)),
        STORES,
        None,
        "2026-01-01T00:00:00Z",
    )
    assert first == [{"pod": "app-0", "task": "1_0", "stores": ["departures-per-carrier-store"], "restored": 1000,
                      "remaining": 9000, "ratePerSecond": None, "secondsLeft": None,
                      "observedAt": "2026-01-01T00:00:00Z"}]  # fmt: skip
    assert summary(first) == "9,000 left"
    second = restore_progress(
        RestoreView((RestoringTask("app-0", "1_0", remaining=5000, restored=5000),)),
        STORES,
        first,
        "2026-01-01T00:00:10Z",
    )
    assert second is not None
    assert (second[0]["ratePerSecond"], second[0]["secondsLeft"]) == (400.0, 12)
    assert summary(second) == "5,000 left ~12s"


def test_a_restarted_restore_or_another_pod_gives_no_rate_and_nothing_restoring_removes_the_field() -> None:
    previous = [{"pod": "app-0", "task": "1_0", "restored": 5000, "observedAt": "2026-01-01T00:00:00Z"}]
    again = restore_progress(
        RestoreView((RestoringTask("app-0", "1_0", 9000, 10),)), STORES, previous, "2026-01-01T00:00:10Z"
    )
    moved = restore_progress(
        RestoreView((RestoringTask("app-1", "1_0", 9000, 6000),)), STORES, previous, "2026-01-01T00:00:10Z"
    )
    assert again is not None and again[0]["ratePerSecond"] is None
    assert moved is not None and moved[0]["ratePerSecond"] is None
    assert restore_progress(RestoreView(()), STORES, previous, "2026-01-01T00:00:10Z") is None
    assert restore_progress(None, STORES, previous, "2026-01-01T00:00:10Z") is None
    assert summary(None) is None


def test_the_reconcile_reports_restore_progress_from_the_pods_status(
    cluster: TestingCluster, kafka: TestingKafka
) -> None:
    instances = TestingInstances()
    instances.documents["10.0.0.1"] = {"workers": [{"tasks": [
        {"task_id": "1_2", "state": "restoring", "restored_records": 300, "restore_remaining": 700}]}]}  # fmt: skip
    labels = {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"}
    started = {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [{"started": True}]}
    cluster.add_pod("apps", "flights-per-carrier-0", labels, started)
    world = World(cluster=cluster, kafka_for=lambda _: kafka, instances=instances)
    app = App(name="flights-per-carrier", namespace="apps", uid="uid-1", generation=1)
    status = reconcile(app, flights_spec(), {}, world, "2026-01-01T00:00:00Z").status
    assert [(e["pod"], e["task"], e["stores"], e["restored"], e["remaining"]) for e in status["restore"]] == [
        ("flights-per-carrier-0", "1_2", ["departures-per-carrier-store"], 300, 700)
    ]
    assert status["restoreProgress"] == "700 left"


T0, T10 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"


def store(name: str, restored: int, remaining: int, rate: float | None = None) -> RestoringStore:
    return RestoringStore(name, f"app-{name}-changelog-0", restored, remaining, rate)


def test_a_pod_reporting_per_store_gets_one_entry_per_store_with_its_rate_and_time_left() -> None:
    task = RestoringTask(
        "app-0", "1_0", 1500, 700, (store("totals", 200, 1000, 50.0), store("counts", 500, 500, 100.0))
    )
    entries = restore_progress(RestoreView((task,)), STORES, None, T0)
    assert entries == [
        {"pod": "app-0", "task": "1_0", "store": "counts", "stores": ["counts"],
         "changelog": "app-counts-changelog-0", "restored": 500, "remaining": 500, "ratePerSecond": 100.0,
         "secondsLeft": 5, "observedAt": T0},
        {"pod": "app-0", "task": "1_0", "store": "totals", "stores": ["totals"],
         "changelog": "app-totals-changelog-0", "restored": 200, "remaining": 1000, "ratePerSecond": 50.0,
         "secondsLeft": 20, "observedAt": T0},
    ]  # fmt: skip
    assert summary(entries) == "1,500 left ~20s"  # the stores restore side by side: the longest


def test_a_store_without_a_rate_from_its_pod_gets_one_from_two_looks_and_a_done_store_has_nothing_left() -> None:
    def look(restored: int, previous: list[dict[str, object]] | None, now: str) -> list[dict[str, object]]:
        stores = (store("counts", restored, 1000 - restored), store("done", 7, 0))
        task = RestoringTask("app-0", "1_0", 1000 - restored, restored, stores)
        entries = restore_progress(RestoreView((task,)), STORES, previous, now)
        assert entries is not None
        return entries

    first = look(100, None, T0)
    assert [(e["store"], e["ratePerSecond"], e["secondsLeft"]) for e in first] == [
        ("counts", None, None),
        ("done", None, 0),
    ]
    assert summary(first) == "900 left"  # a store with records left has no estimate yet
    second = look(600, first, T10)
    assert [(e["store"], e["ratePerSecond"], e["secondsLeft"]) for e in second] == [
        ("counts", 50.0, 8),
        ("done", None, 0),
    ]
    assert summary(second) == "400 left ~8s"


def test_old_pods_and_old_status_entries_still_give_progress_and_a_rate() -> None:
    """A pod of a runtime before per-store progress reports per task only, and the previous status.restore may
    have been written by an operator before per-store entries: the task's entry and its rate still come out."""
    documents = {"app-0": {"workers": [{"tasks": [
        {"task_id": "1_0", "state": "restoring", "restored_records": 3000, "restore_remaining": 1000}]}]}}  # fmt: skip
    view = restore_view(documents)
    assert view.tasks == (RestoringTask("app-0", "1_0", 1000, 3000),)
    written_by_an_older_operator = [{"pod": "app-0", "task": "1_0", "stores": ["departures-per-carrier-store"],
                                     "restored": 1000, "remaining": 3000, "ratePerSecond": None,
                                     "secondsLeft": None, "observedAt": T0}]  # fmt: skip
    entries = restore_progress(view, STORES, written_by_an_older_operator, T10)
    assert entries is not None
    assert [(e["task"], e["stores"], e["ratePerSecond"], e["secondsLeft"]) for e in entries] == [
        ("1_0", ["departures-per-carrier-store"], 200.0, 5)
    ]


def test_the_pods_per_store_fields_are_read_and_malformed_ones_are_not_reported() -> None:
    documents: dict[str, dict[str, object] | str] = {"app-0": {"workers": [{"tasks": [
        {"task_id": "1_0", "state": "restoring", "restored_records": 5, "restore_remaining": 15, "stores": [
            {"store": "counts", "changelog": "app-counts-changelog-0", "restored_records": 5,
             "restore_remaining": 15, "records_per_second": 2.5, "seconds_left": 6.0},
            {"store": "odd", "restored_records": "many", "restore_remaining": -3, "records_per_second": "fast"},
            {"changelog": "no-name-0"},
            "not an object",
        ]},
        {"task_id": "1_1", "state": "restoring", "stores": "not a list"},
    ]}]}}  # fmt: skip
    (counts, odd), other = restore_view(documents).tasks[0].stores, restore_view(documents).tasks[1]
    assert counts == RestoringStore("counts", "app-counts-changelog-0", 5, 15, 2.5)
    assert odd == RestoringStore("odd", "", 0, 0, None)
    assert other.stores == ()


def test_many_stores_are_capped_and_the_last_entry_sums_up_the_others_so_the_totals_stay_exact() -> None:
    tasks = tuple(
        RestoringTask(f"app-{pod}", f"1_{pod}", 0, 0, tuple(store(f"s{n}", 10, 100 * (pod * 10 + n), 10.0)
                                                              for n in range(10)))
        for pod in range(3)
    )  # fmt: skip
    entries = restore_progress(RestoreView(tasks), STORES, None, T0)
    assert entries is not None and len(entries) == MAX_RESTORE_ENTRIES
    listed, more = entries[:-1], entries[-1]
    every_remaining = [100 * i for i in range(30)]
    assert sorted(e["remaining"] for e in listed) == every_remaining[-len(listed) :]  # the most left are listed
    assert more["omitted"] == 30 - len(listed)
    assert (more["remaining"], more["restored"]) == (sum(every_remaining[: more["omitted"]]), 10 * more["omitted"])
    assert more["ratePerSecond"] == 10.0 * more["omitted"]
    assert summary(entries) == f"{sum(every_remaining):,} left ~290s"
    assert (more["pod"], more["task"], "store" in more) == ("*", "*", False)


def test_the_crd_bounds_status_restore_and_every_entry_the_operator_writes_fits_it() -> None:
    """The API server refuses more than MAX_RESTORE_ENTRIES entries, and the entries written (per store, per
    task of an older pod, the '*' sums) carry the fields the schema requires (``pod`` and ``task`` also in the
    CRDs of older releases)."""
    schema = structural_schema(StreamAppStatus, keep_defaults=False)["properties"]["restore"]
    assert schema["maxItems"] == MAX_RESTORE_ENTRIES
    required, known = set(schema["items"]["required"]), set(schema["items"]["properties"])
    assert {"pod", "task"} <= required
    per_task = RestoringTask("app-0", "0_0", 1000, 5)
    per_store = tuple(RestoringTask(f"app-{n}", "1_0", 0, 0, (store("s", 1, n),)) for n in range(1, 30))
    entries = restore_progress(RestoreView((per_task, *per_store)), STORES, None, T0)
    assert entries is not None and {"omitted", "store", "stores"} <= {k for e in entries for k in e}
    for entry in entries:
        assert required <= set(entry) and set(entry) <= known, entry
