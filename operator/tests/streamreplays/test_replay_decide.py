"""The StreamReplay's decisions before any step (``streamreplays.decide``, pure): a replay waits for the app it
names, fails on a topology it cannot run before anything else is looked at, refuses a handover into the app's own
outputs or onto a StreamApp it did not create, and records the identities it runs under once."""

from __future__ import annotations

import copy
from typing import Any

from operator_fakes import flights_spec
from replay_fakes import HANDOVER, NS, REPLAY, SECOND_TOPOLOGY
from streamapp_operator.outcomes import Failed, Waiting
from streamapp_operator.streamreplays.decide import decide, parse_spec

APP: dict[str, Any] = {"metadata": {"name": "flights", "namespace": NS, "uid": "app-uid"}, "spec": flights_spec()}


def _spec(**fields: Any) -> Any:
    parsed = parse_spec({**HANDOVER, **fields})
    assert not isinstance(parsed, Failed)
    return parsed


def test_a_replay_of_a_missing_app_waits_naming_it() -> None:
    decided = decide(REPLAY, _spec(), None, None, {"phase": "Pending"})
    assert isinstance(decided.outcome.halt, Waiting) and str(decided.outcome.halt) == "StreamApp flights does not exist"


def test_a_topology_the_replay_cannot_run_fails_before_the_outputs_and_the_new_versions_name() -> None:
    holder = {"kind": "StreamApp", "metadata": {"name": "flights-v2", "namespace": NS, "uid": "someone-elses"}}
    loop = copy.deepcopy(SECOND_TOPOLOGY)
    loop["nodes"][-1]["topic"] = "flights"  # writes the topic it reads
    decided = decide(REPLAY, _spec(topology=loop), APP, holder, {"phase": "Pending"})
    assert isinstance(decided.outcome.halt, Failed) and decided.outcome.halt.reason == "UnsupportedTopology"
    assert decided.outcome.status == {}


def test_a_new_versions_name_this_replay_did_not_create_is_refused_before_the_job() -> None:
    holder = {"kind": "StreamApp", "metadata": {"name": "flights-v2", "namespace": NS, "uid": "someone-elses"}}
    decided = decide(REPLAY, _spec(), APP, holder, {"phase": "Pending"})
    assert isinstance(decided.outcome.halt, Failed) and decided.outcome.halt.reason == "NewVersionNameInUse"


def test_the_identities_are_decided_once_and_never_again() -> None:
    first = decide(REPLAY, _spec(topology=SECOND_TOPOLOGY), APP, None, {"phase": "Pending"})
    assert first.outcome.halt is None
    assert first.outcome.status == {
        "applicationId": "flights-flights-v2",
        "replayId": "flights-v2-01234567",
        "appUid": "app-uid",
    }
    again = decide(REPLAY, _spec(), APP, None, {"phase": "Pending", **first.outcome.status})
    assert again.outcome.status == {} and again.outcome.halt is None


def test_an_invalid_spec_is_named() -> None:
    parsed = parse_spec({"appRef": {"name": "flights"}, "mode": "sideways"})
    assert isinstance(parsed, Failed) and parsed.reason == "InvalidSpec" and "mode" in str(parsed)
