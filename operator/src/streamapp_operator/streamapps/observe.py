"""Observation of a StreamApp's world: its child objects, its pods' restore progress, and its topics and
consumer group in Kafka.

``observe`` only reads. Kubernetes failures propagate (``k8s.KubernetesUnavailable``: the reconcile is
retried), while Kafka failures are recorded in :attr:`Observation.kafka_error`, because an unreachable
broker is a condition to report (``Degraded``), not a reason to stop reconciling the workload. A pod
that does not answer ``/status`` is recorded too (``Restoring=Unknown``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from streamapp.topology import TopologyDescription

from streamapp_operator.instances import InstanceReader, read_statuses
from streamapp_operator.k8s import Cluster, KubernetesUnavailable
from streamapp_operator.kafka import GroupLag, KafkaAdmin, KafkaUnavailable
from streamapp_operator.streamapps import volumes
from streamapp_operator.streamapps.desired import HTTP_PORT, config_map_name, selector
from streamapp_operator.streamapps.dropped_records import PodDrops, pod_drops
from streamapp_operator.streamapps.pod_status import (
    RestoreView,
    failing_threads,
    pod_creation_failures,
    pods_missing,
    restore_view,
    started_pods,
    unschedulable_pods,
)


@dataclass(frozen=True)
class Observation:
    """What exists now. Objects are plain dicts as served by the API server (None: absent).

    ``pods`` are the app's pods (the StatefulSet's selector), ``disruption_budgets`` every
    PodDisruptionBudget of the namespace (someone else's may already cover the pods). ``partitions`` holds
    the partition counts of the topology's topics that exist (external sources, repartition and changelog
    topics); ``group`` the consumer group's lag and state over the topics it consumes; ``kafka_error`` why
    Kafka could not be read (then ``partitions`` is empty and ``group`` None). ``restore`` is what the pods
    that are not ready report about restoration (None: pods not asked), ``threads`` the stream threads
    that keep failing inside the pods (one line per pod, ``pod_status.failing_threads``), ``creation`` why
    the StatefulSet cannot create its pods (``pod_status.pod_creation_failures``), ``unscheduled`` the pods no
    node can take (``pod_status.unschedulable_pods``), ``drops`` the records each
    pod that answered ``/status`` dropped, by reason (``dropped_records.pod_drops``; None: pods not asked).
    """

    config_map: dict[str, Any] | None = None
    service: dict[str, Any] | None = None
    stateful_set: dict[str, Any] | None = None
    disruption_budget: dict[str, Any] | None = None
    disruption_budgets: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    restore: RestoreView | None = None
    threads: list[str] = field(default_factory=list)
    drops: dict[str, PodDrops] | None = None
    creation: list[str] = field(default_factory=list)
    unscheduled: list[str] = field(default_factory=list)
    partitions: Mapping[str, int] = field(default_factory=dict)
    group: GroupLag | None = None
    kafka_error: str | None = None
    claims: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    processed: int | None = None
    """Records processed by the started pods' stream threads (``/status``, summed; None: no pod answered or
    pods not asked): the autoscaler's rate sample, from the same ``/status`` read as ``restore``."""


@dataclass(frozen=True)
class Target:
    """What to observe: StreamApp ``namespace/name``, the state claims of its first ``claim_ordinals``
    ordinals (at least the StatefulSet's replicas) and, given a ``topology`` and ``application_id``, its topics
    and consumer group."""

    namespace: str
    name: str
    topology: TopologyDescription | None = None
    application_id: str | None = None
    claim_ordinals: int = 0


def observe(
    target: Target, cluster: Cluster, kafka: KafkaAdmin | None = None, instances: InstanceReader | None = None
) -> Observation:
    """Read the children and pods of ``target``, given ``instances`` the ``/status`` of its started pods
    (once per reconcile: restoration, failing threads, drops and the processed-records total) and, given
    ``kafka``, its topics and group."""
    namespace, name = target.namespace, target.name
    pods = cluster.list_pods(namespace, selector(name))
    restore, threads, drops, processed = (
        observe_instances(pods, instances) if instances is not None else (None, [], None, None)
    )
    stateful_set = cluster.get("StatefulSet", namespace, name)
    ordinals = volumes.claim_ordinals(target.claim_ordinals, None, stateful_set)
    claims = {
        volumes.claim_name(name, n): cluster.get("PersistentVolumeClaim", namespace, volumes.claim_name(name, n))
        for n in range(ordinals)
    }
    children = Observation(
        config_map=cluster.get("ConfigMap", namespace, config_map_name(name)),
        service=cluster.get("Service", namespace, name),
        stateful_set=stateful_set,
        disruption_budget=cluster.get("PodDisruptionBudget", namespace, name),
        disruption_budgets=cluster.list_disruption_budgets(namespace),
        pods=pods,
        restore=restore,
        threads=threads,
        drops=drops,
        creation=observe_creation(cluster, stateful_set),
        unscheduled=unschedulable_pods(pods, time.time()),
        claims=claims,
        processed=processed,
    )
    topology, application_id = target.topology, target.application_id
    if topology is None or application_id is None or kafka is None:
        return children
    all_topics, consumed = topology_topics(topology, application_id)
    try:
        partitions = kafka.partition_counts(all_topics)
        group = kafka.group_lag(application_id, [t for t in consumed if t in partitions])
    except KafkaUnavailable as exc:
        return replace(children, kafka_error=str(exc))
    return replace(children, partitions=partitions, group=group)


def observe_creation(cluster: Cluster, stateful_set: dict[str, Any] | None) -> list[str]:
    """Why the StatefulSet cannot create its pods (``pod_status.pod_creation_failures``), asked only while
    pods are missing. Events that cannot be listed (no RBAC for it) leave it unsaid rather than stopping
    the reconcile."""
    if stateful_set is None or not pods_missing(stateful_set):
        return []
    metadata = stateful_set["metadata"]
    try:
        events = cluster.list_events(metadata["namespace"], "StatefulSet", metadata["name"], "FailedCreate")
    except KubernetesUnavailable:
        return []
    return pod_creation_failures(stateful_set, events, time.time())


def observe_instances(
    pods: list[dict[str, Any]], instances: InstanceReader
) -> tuple[RestoreView, list[str], dict[str, PodDrops], int | None]:
    """Ask the started pods for their ``/status`` (concurrently, within one overall deadline, those that are
    not ready first: ``instances.read_statuses``); a pod that cannot answer is noted, not raised.

    Returns what the pods that are not ready say about restoration, the stream threads failing in any
    pod (a ready pod may still restart a failing thread), the records each pod that answered dropped, and the
    records all of them processed (:func:`processed_total`). A ready pod that cannot answer does not make
    ``Restoring`` unknown: it has restored everything."""
    started = started_pods(pods)
    documents = read_statuses(instances, [(name, ip) for name, ip, _ in started], HTTP_PORT)
    unready = {name for name, _, ready in started if not ready}
    restore = restore_view({pod: doc for pod, doc in documents.items() if pod in unready})
    return restore, failing_threads(documents, time.time()), pod_drops(documents), processed_total(documents)


def processed_total(documents: Mapping[str, dict[str, Any] | str]) -> int | None:
    """Records processed by the pods' stream threads (``/status`` ``workers[].metrics.records_processed_total``,
    summed over the documents: pod -> ``/status`` or why there is none); None when no pod answered."""
    total, answered = 0, False
    for document in documents.values():
        if not isinstance(document, Mapping):
            continue
        answered = True
        for worker in document.get("workers") or []:
            metrics = worker.get("metrics") if isinstance(worker, Mapping) else None
            if isinstance(metrics, Mapping) and isinstance(metrics.get("records_processed_total"), int):
                total += metrics["records_processed_total"]
    return total if answered else None


def topology_topics(topology: TopologyDescription, application_id: str) -> tuple[list[str], list[str]]:
    """(every topic the topology reads or owns, the topics its consumer group consumes).

    The group consumes the external source topics and the repartition topics; changelog topics are read
    by restore consumers outside the group, and sink topics are only written.
    """
    consumed: list[str] = []
    changelogs: list[str] = []
    for sub in topology.subtopologies():
        for ref in sub.source_topics:
            _append_new(consumed, ref.resolve(application_id))
        for store in sub.stores:
            _append_new(changelogs, topology.changelog_topic(application_id, store))
    return consumed + [t for t in changelogs if t not in consumed], consumed


def _append_new(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)
