"""One condition transition for both Kinds (``streamapp_operator.outcomes``), the Kubernetes rule of
``meta.SetStatusCondition``: ``lastTransitionTime`` moves only when ``status`` does."""

from __future__ import annotations

from streamapp_operator.outcomes import Condition, set_condition, transition

EARLIER, NOW = "2026-11-29T10:00:00Z", "2026-11-29T11:00:00Z"


def test_last_transition_time_stays_while_the_status_stays_and_moves_when_it_changes() -> None:
    old = {"type": "Ready", "status": "True", "reason": "A", "message": "", "lastTransitionTime": EARLIER}
    same = transition(old, Condition("Ready", "True", "B", "other words", 3), NOW)
    flipped = transition(old, Condition("Ready", "False", "B", "", 3), NOW)
    assert same["lastTransitionTime"] == EARLIER and same["reason"] == "B" and same["observedGeneration"] == 3
    assert flipped["lastTransitionTime"] == NOW
    assert transition(None, Condition("Ready", "True", "A", "", 1), NOW)["lastTransitionTime"] == NOW


def test_set_condition_replaces_one_type_keeps_the_others_and_orders_them() -> None:
    order = ["Ready", "Progressing", "Degraded"].index
    previous = [
        {"type": "Degraded", "status": "False", "lastTransitionTime": EARLIER},
        {"type": "Progressing", "status": "True", "lastTransitionTime": EARLIER},
    ]
    result = set_condition(previous, Condition("Ready", "True", "Up", "", 2), NOW, order)
    assert [c["type"] for c in result] == ["Ready", "Progressing", "Degraded"]
    assert result[1] == previous[1] and result[1] is not previous[1]
    result = set_condition(result, Condition("Progressing", "True", "RollingOut", "pod 1", 2), NOW, order)
    assert result[1]["lastTransitionTime"] == EARLIER and result[1]["message"] == "pod 1"
