"""Standby tasks (``num.standby.replicas``): warm copies of stateful tasks' stores on other instances, kept up
to date from the changelogs, so a failover restores only the tail (Kafka Streams' ``StandbyTask``).

librdkafka has no pluggable assignor, so the broker cannot hand out standbys. Instead every stream thread
computes the same placement from the consumer group's description (docs/adr/0004-standby-replicas.md):

- ``plan_standbys`` (pure): for each stateful task, its active owner is the member assigned the task's input
  partitions; its ``replicas`` standbys go to the next instances in the sorted ring of instances after the
  active's one (never the active's own instance: its stream threads share one state directory), and within an
  instance to its least loaded stream thread (ties: lowest thread index);
- ``StandbyManager`` (one per stream thread): every ``refresh_interval_s`` while the group is stable, describes
  the group, keeps the standbys planned for this thread and closes the others; a standby opens the task's
  stores in the task folder ``<state.dir>/<application.id>/<taskId>/`` (the very folder the active task would
  use on this instance) and the thread's changelog reader keeps them updated (``read_committed`` under EOS).
  A task the plan leaves unowned (the group is between assignments) keeps its standby.

When this instance later becomes the task's active owner, the active task opens the same folder and restores
only the changelog records after the standby's offset. A standby of a task that becomes active in this very
thread is closed first (``release``); one held by another thread of the instance is closed by that thread's
next refresh (the active retries the store lock meanwhile).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from streamapp.kafka.types import GroupDescription, KafkaClientError, TopicPartition, parse_client_id
from streamapp.processing.task import StoreFactory, TaskId, open_task_stores
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from streamapp.state.directory import StateDirectory, TaskDirectoryLock, TaskDirectoryLockedError
from streamapp.state.restore import ChangelogReader
from streamapp.state.stores import StoreLockedError
from streamapp.topology import Subtopology, TopologyDescription

__all__ = ["MemberRef", "StandbyManager", "StandbyTask", "plan_standbys"]

log = logging.getLogger(__name__)

GroupDescriber = Callable[[], GroupDescription]
"""Describes the application's consumer group (``TopicAdmin.describe_group(application.id)``)."""


@dataclass(frozen=True, order=True)
class MemberRef:
    """A stream thread of an instance: ``(instance id, thread index)``."""

    instance: str
    thread: int


def plan_standbys(
    owners: Mapping[TaskId, MemberRef],
    members: Iterable[MemberRef],
    stateful: Iterable[TaskId],
    replicas: int,
) -> dict[TaskId, list[MemberRef]]:
    """Where each stateful task's standbys go (see the module docstring); deterministic in its inputs.

    ``owners``: the active owner of each task that has one; ``members``: every stream thread in the group.
    Tasks without an owner get no entry. With fewer than ``replicas + 1`` instances a task gets fewer standbys.
    """
    members = sorted(set(members))
    instances = sorted({m.instance for m in members})
    threads: dict[str, list[MemberRef]] = {}
    for member in members:
        threads.setdefault(member.instance, []).append(member)
    load: Counter[MemberRef] = Counter(owners.values())
    plan: dict[TaskId, list[MemberRef]] = {}
    for task in sorted(stateful):
        active = owners.get(task)
        if active is None:
            continue
        start = instances.index(active.instance) + 1 if active.instance in instances else 0
        ring = [instances[(start + i) % len(instances)] for i in range(len(instances))]
        chosen: list[MemberRef] = []
        for instance in [i for i in ring if i != active.instance][:replicas]:
            member = min(threads[instance], key=lambda m: (load[m], m.thread))
            load[member] += 1
            chosen.append(member)
        plan[task] = chosen
    return plan


class StandbyTask:
    """A standby copy of one task's stores (see the module docstring). Raises StoreLockedError from
    ``open`` while another owner (an active task, another thread's standby) holds a store."""

    def __init__(
        self,
        task_id: TaskId,
        subtopology: Subtopology,
        description: TopologyDescription,
        application_id: str,
        task_dir: Path,
        store_factory: StoreFactory,
    ) -> None:
        self.id = task_id
        self.task_dir = task_dir
        self.stores: dict[str, ChangeLoggingKeyValueStore] = {}
        self._subtopology = subtopology
        self._description = description
        self._application_id = application_id
        self._factory = store_factory
        self._checkpoint = OffsetCheckpoint(task_dir / CHECKPOINT_FILE_NAME)
        self._lock: TaskDirectoryLock | None = None

    def open(self) -> None:
        self._lock = TaskDirectoryLock(self.task_dir)
        try:
            self.stores.update(
                open_task_stores(
                    self._description,
                    self._subtopology,
                    self._application_id,
                    self.id,
                    self.task_dir,
                    self._factory,
                    lambda: -1,
                )
            )
        except Exception:
            self.close()
            raise

    def changelog_offsets(self) -> dict[TopicPartition, int]:
        """Offset of the last changelog record applied, per store that has one."""
        offsets: dict[TopicPartition, int] = {}
        for store in self.stores.values():
            offset = store.changelog_offset()
            if offset is not None:
                offsets[store.changelog] = offset
        return offsets

    def checkpoint(self) -> None:
        if self.stores:
            self._checkpoint.write(self.changelog_offsets())

    def close(self) -> None:
        """Write the checkpoint and release the stores. Idempotent."""
        try:
            self.checkpoint()
        except Exception:
            log.exception("Failed to checkpoint standby task %s", self.id)
        for store in self.stores.values():
            try:
                store.close()
            except Exception:
                log.exception("Failed to close store %s of standby task %s", store.name, self.id)
        self.stores.clear()
        if self._lock is not None:
            self._lock.release()
            self._lock = None


class StandbyManager:
    """The standby tasks of one stream thread (see the module docstring)."""

    def __init__(
        self,
        me: MemberRef,
        application_id: str,
        replicas: int,
        description: TopologyDescription,
        topic_subtopologies: Mapping[str, int],
        state_dir: Path,
        store_factory: StoreFactory,
        reader: ChangelogReader,
        describe: GroupDescriber,
        active_tasks: Callable[[], Iterable[TaskId]],
        refresh_interval_s: float = 2.0,
    ) -> None:
        self.me = me
        self.replicas = replicas
        self.tasks: dict[TaskId, StandbyTask] = {}
        self._application_id = application_id
        self._description = description
        self._subtopologies = {sub.id: sub for sub in description.subtopologies()}
        self._stateful = {sub.id for sub in self._subtopologies.values() if sub.stores}
        self._topic_subtopologies = dict(topic_subtopologies)
        self._state_dir = state_dir
        self._factory = store_factory
        self._reader = reader
        self._describe = describe
        self._active_tasks = active_tasks
        self._interval_s = refresh_interval_s
        self._next_refresh = 0.0
        self._warned_alone = False

    @property
    def enabled(self) -> bool:
        return self.replicas > 0 and bool(self._stateful)

    def maybe_refresh(self, now_s: float | None = None) -> None:
        """Refresh the standbys if the interval passed (cheap otherwise). Group-description failures are logged
        and retried at the next interval: standbys are an optimisation, never a reason to stop processing."""
        now = time.monotonic() if now_s is None else now_s
        if not self.enabled or now < self._next_refresh:
            return
        self._next_refresh = now + self._interval_s
        try:
            group = self._describe()
        except KafkaClientError as exc:
            log.info("Cannot describe the group to place standby tasks: %s", exc)
            return
        if group.state != "stable":
            return
        self.apply(self.wanted(group))
        for task in self.tasks.values():
            task.checkpoint()
            StateDirectory.touch(task.task_dir)

    def wanted(self, group: GroupDescription) -> set[TaskId]:
        """The standby tasks the plan gives this thread, plus current standbys of tasks left unowned."""
        owners: dict[TaskId, MemberRef] = {}
        members: list[MemberRef] = []
        for member in group.members:
            parsed = parse_client_id(self._application_id, member.client_id)
            if parsed is None:
                continue
            ref = MemberRef(*parsed)
            members.append(ref)
            for tp in member.partitions:
                subtopology = self._topic_subtopologies.get(tp.topic)
                if subtopology in self._stateful:
                    owners[TaskId(subtopology, tp.partition)] = ref
        if len({m.instance for m in members}) < 2 and not self._warned_alone:
            self._warned_alone = True
            log.warning(
                "num.standby.replicas=%d but the group has one instance: no standby can be placed", self.replicas
            )
        plan = plan_standbys(owners, members, owners, self.replicas)
        mine = {task for task, placed in plan.items() if self.me in placed}
        kept = {task for task in self.tasks if task not in owners}
        same_instance_actives = {task for task, owner in owners.items() if owner.instance == self.me.instance}
        return (mine | kept) - same_instance_actives - set(self._active_tasks())

    def apply(self, wanted: set[TaskId]) -> None:
        """Open the wanted standbys that are not open yet, close the others."""
        for task_id in sorted(set(self.tasks) - wanted):
            self.release(task_id)
        for task_id in sorted(wanted - set(self.tasks)):
            task = StandbyTask(
                task_id,
                self._subtopologies[task_id.subtopology],
                self._description,
                self._application_id,
                self._state_dir / str(task_id),
                self._factory,
            )
            try:
                task.open()
            except (StoreLockedError, TaskDirectoryLockedError) as exc:
                log.info("Standby task %s waits for its state to be released: %s", task_id, exc)
                continue
            self.tasks[task_id] = task
            self._reader.register_standby(str(task_id), list(task.stores.values()))
            log.info("Created standby task %s", task_id)

    def release(self, task_id: TaskId) -> None:
        """Close the standby of ``task_id`` if there is one (it becomes active here, or moved away)."""
        task = self.tasks.pop(task_id, None)
        if task is None:
            return
        self._reader.unregister(str(task_id))
        task.close()
        log.info("Closed standby task %s", task_id)

    def close_all(self) -> None:
        for task_id in list(self.tasks):
            self.release(task_id)

    def statuses(self) -> list[tuple[str, dict[str, int]]]:
        """``(task id, {changelog partition: next offset to apply})`` of every standby."""
        return [
            (str(task_id), {str(tp): o for tp, o in self._reader.standby_offsets(str(task_id)).items()})
            for task_id in sorted(self.tasks)
        ]
