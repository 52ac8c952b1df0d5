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

A standby and the active task of one task share one ``StateManager`` (``streamapp.processing.state_manager``,
Kafka's ``ProcessorStateManager``), so a thread moves a task's state between the two kinds without reopening or
copying a store (Kafka's task recycling):

- a standby of a task that becomes active in this very thread hands its open state to the new active task
  (``take``), which restores only the changelog records after the standby's offsets;
- an active task this thread loses at a revocation is closed cleanly and its open state becomes a standby here
  (``adopt``) until the next refresh decides: kept if the plan places the task's standby on this thread, closed
  otherwise (e.g. the task moved to another thread of this instance, which retries the folder lock meanwhile).

A standby held by another thread of the instance (a separate worker process) is closed by that thread's next
refresh; the new active opens the same folder then and restores only the changelog records after the standby's
offsets.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from streamapp.kafka.types import GroupDescription, KafkaClientError, TopicPartition, parse_client_id
from streamapp.processing.state_manager import StateManager, StoreFactory, no_record_timestamp
from streamapp.processing.task_id import TaskId
from streamapp.state.changelogging import ChangeLoggingKeyValueStore
from streamapp.state.directory import TaskDirectoryLockedError
from streamapp.state.restore import ChangelogReader
from streamapp.state.stores import StoreLockedError
from streamapp.topology import TopologyDescription

__all__ = ["MemberRef", "StandbyManager", "StandbyTask", "plan_standbys"]

log = logging.getLogger(__name__)

_ADOPTED_RETRY_S = 0.2
"""How soon a refresh that found the group rebalancing is retried while an adopted standby awaits the plan."""

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
    """A standby copy of one task's stores (see the module docstring), kept in the task's ``StateManager``."""

    def __init__(self, state: StateManager) -> None:
        self.id = state.task_id
        self.task_dir = state.task_dir
        self.state_manager = state
        self.stores: dict[str, ChangeLoggingKeyValueStore] = state.stores

    def open(self) -> None:
        """Open the task's state (a no-op but for the write timestamp when it is open already: recycled from the
        active task). Raises StoreLockedError or TaskDirectoryLockedError while another owner (an active task, another
        thread's standby) holds the folder or a store; nothing stays open then."""
        self.state_manager.open(no_record_timestamp)

    def changelog_offsets(self) -> dict[TopicPartition, int]:
        """Offset of the last changelog record applied, per store that has one."""
        return self.state_manager.changelog_offsets()

    def checkpoint(self) -> None:
        self.state_manager.checkpoint()

    def recycle(self) -> StateManager:
        """Write the checkpoint and hand the open state over (to the active task of this thread)."""
        self.checkpoint()
        return self.state_manager

    def close(self) -> None:
        """Write the checkpoint and release the stores. Idempotent."""
        try:
            self.checkpoint()
        except Exception:
            log.exception("Failed to checkpoint standby task %s", self.id)
        self.state_manager.close(checkpoint=False)


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
        self._adopted = False
        """Whether a standby was adopted since the last refresh that placed the standbys (``adopt``)."""

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
            if self._adopted:  # an adopted standby may hold a folder another thread of this instance waits for
                self._next_refresh = now + min(self._interval_s, _ADOPTED_RETRY_S)
            return
        self._adopted = False
        self.apply(self.wanted(group))
        for task in self.tasks.values():
            task.checkpoint()
            task.state_manager.touch()

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
                StateManager(
                    task_id,
                    self._state_dir / str(task_id),
                    self._factory,
                    self._description,
                    self._subtopologies[task_id.subtopology],
                    self._application_id,
                )
            )
            try:
                task.open()
            except (StoreLockedError, TaskDirectoryLockedError) as exc:
                log.info("Standby task %s waits for its state to be released: %s", task_id, exc)
                continue
            self._add(task)
            log.info("Created standby task %s", task_id)

    def adopt(self, state: StateManager) -> bool:
        """Keep the open state of an active task this thread just closed cleanly as a standby of that task, until the
        next refresh decides (see the module docstring); the next refresh is due at once. False (the caller closes
        the state) when standbys are off or the task is stateless."""
        task_id = state.task_id
        if not self.enabled or task_id.subtopology not in self._stateful or task_id in self.tasks:
            return False
        task = StandbyTask(state)
        task.open()  # open already: binds the standby's write timestamp
        self._add(task)
        self._next_refresh = 0.0
        self._adopted = True
        log.info("Standby task %s recycled from the active task", task_id)
        return True

    def take(self, task_id: TaskId) -> StateManager | None:
        """The open state of this thread's standby of ``task_id``, handed over to the active task this thread creates
        for it (no longer a standby here), or ``None`` without one."""
        task = self.tasks.pop(task_id, None)
        if task is None:
            return None
        self._reader.unregister(str(task_id))
        try:
            state = task.recycle()
        except Exception:
            log.exception("Failed to checkpoint standby task %s; closing it instead of recycling it", task_id)
            task.close()
            return None
        log.info("Standby task %s recycled into the active task", task_id)
        return state

    def release(self, task_id: TaskId) -> None:
        """Close the standby of ``task_id`` if there is one (it moved away, or became active on another thread)."""
        task = self.tasks.pop(task_id, None)
        if task is None:
            return
        self._reader.unregister(str(task_id))
        task.close()
        log.info("Closed standby task %s", task_id)

    def _add(self, task: StandbyTask) -> None:
        self._reader.register_standby(str(task.id), list(task.stores.values()))
        self.tasks[task.id] = task

    def close_all(self) -> None:
        for task_id in list(self.tasks):
            self.release(task_id)

    def statuses(self) -> list[tuple[str, dict[str, int]]]:
        """``(task id, {changelog partition: next offset to apply})`` of every standby."""
        return [
            (str(task_id), {str(tp): o for tp, o in self._reader.standby_offsets(str(task_id)).items()})
            for task_id in sorted(self.tasks)
        ]
