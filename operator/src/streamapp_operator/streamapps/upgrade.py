"""Upgrade decisions (pure): what the operator does when ``spec.topology`` changes under a running StreamApp.

The running and the new topology descriptions are compared by ``streamapp.topology.compatibility.compare``
(docs/reset.md "Upgrade compatibility"). A compatible change rolls. A change that breaks state (a store
removed or renamed, a store's serde, a window's size or grace, an internal topic renamed, a partition count)
follows ``spec.upgradePolicy``, as Kafka Streams' upgrade guidance offers (reset the application, or run it
under a new ``application.id``):

- ``refuse`` (default): the running topology stays; condition ``UpgradeCompatible=False`` with reason
  ``IncompatibleTopologyChange`` names the changes;
- ``newApplicationId``: the new topology runs as ``<spec.applicationId>-g<generation>``: a new consumer group
  and new internal topics, so it starts without state and reads its input from ``auto.offset.reset``
  (earliest); the old group and internal topics are left for the operator (or a person) to delete;
- ``reset``: the declarative reset (``streamapp_operator.streamapps.reset``) runs with nonce ``upgrade-<generation>`` to
  ``earliest``, then the new topology starts on the same ``application.id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from streamapp.topology.compatibility import CompatibilityReport

from streamapp_operator.streamapps.reset import ResetSpec

__all__ = ["UPGRADE_COMPATIBLE", "UpgradeDecision", "UpgradePolicy", "decide_upgrade", "new_application_id"]

UPGRADE_COMPATIBLE = "UpgradeCompatible"
"""The condition type: ``True`` when the running topology is the spec's or a compatible change of it."""


class UpgradePolicy(StrEnum):
    """``spec.upgradePolicy``: what to do with a topology change that breaks state."""

    REFUSE = "refuse"
    NEW_APPLICATION_ID = "newApplicationId"
    RESET = "reset"


@dataclass(frozen=True)
class UpgradeDecision:
    """``action``: ``roll`` (apply the new topology), ``refuse`` (keep the running one), ``newApplicationId``
    or ``reset`` (then roll); ``application_id`` the id the application runs with afterwards; ``reset`` the
    reset to run first (``reset`` only); ``status``, ``reason`` and ``message`` of the ``UpgradeCompatible``
    condition."""

    action: Literal["roll", "refuse", "newApplicationId", "reset"]
    application_id: str
    status: Literal["True", "False"]
    reason: str
    message: str
    reset: ResetSpec | None = None


def new_application_id(spec_application_id: str, generation: int) -> str:
    """``<spec.applicationId>-g<generation>``: one id per incompatible generation, derived from the spec (so
    the same generation always gives the same id, also after an operator restart)."""
    return f"{spec_application_id}-g{generation}"


def decide_upgrade(
    report: CompatibilityReport,
    policy: UpgradePolicy,
    *,
    spec_application_id: str,
    running_application_id: str,
    generation: int,
) -> UpgradeDecision:
    """The decision for a topology change whose findings are ``report``, made for ``metadata.generation``
    ``generation``; ``running_application_id`` is the id the application runs with now (status)."""
    if report.compatible:
        changes = len(report.findings)
        message = f"{changes} compatible change(s) roll" if changes else "the topology is unchanged"
        return UpgradeDecision("roll", running_application_id, "True", "Compatible", message)
    summary = report.summary()
    if policy is UpgradePolicy.NEW_APPLICATION_ID:
        new_id = new_application_id(spec_application_id, generation)
        message = f"{summary}; the new topology runs as application {new_id} (upgradePolicy newApplicationId)"
        return UpgradeDecision("newApplicationId", new_id, "True", "NewApplicationId", message)
    if policy is UpgradePolicy.RESET:
        message = f"{summary}; resetting application {running_application_id} first (upgradePolicy reset)"
        reset = ResetSpec(nonce=f"upgrade-{generation}", to="earliest")
        return UpgradeDecision("reset", running_application_id, "True", "Reset", message, reset)
    message = (
        f"{summary}; the running topology stays. Set spec.upgradePolicy to newApplicationId or reset to apply "
        "this change (docs/reset.md)"
    )
    return UpgradeDecision("refuse", running_application_id, "False", "IncompatibleTopologyChange", message)
