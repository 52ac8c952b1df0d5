"""``InteractiveQueries`` decides where a query goes from the group description (``streamapp.query.router``): the
owner's answer when it runs, its standby's (labelled stale) while it restores, the failure reasons of IQv2
otherwise, and clear errors for bad requests. The stream threads' pipes and the other instances are small fakes
behind the router's two seams (``channels``, ``forward``)."""

from __future__ import annotations

import re

import pytest
from query_fakes import FakeInstances, FakeThread, key_on, member, router
from streamapp.processing.queries import LocalQuery
from streamapp.query.requests import (
    FailureReason,
    KeyQuery,
    PositionBound,
    QueryError,
    RangeQuery,
    StateQueryRequest,
    WindowKeyQuery,
)


def test_a_key_owned_here_is_answered_by_the_local_stream_thread() -> None:
    thread = FakeThread({0: ("active", 4)})
    queries = router(
        [thread], [member("me", 0, endpoint="me:1"), member("other", 1, endpoint="other:1")], FakeInstances({})
    )
    result = queries.query(StateQueryRequest("counts", KeyQuery(key_on(0))))
    only = result.only_result()
    assert (only.partition, only.source, only.result, only.instance, only.stale) == (0, "active", 4, "me", False)
    assert thread.asked == [LocalQuery("counts", 0, KeyQuery(key_on(0)), (0,))]


def test_a_key_owned_elsewhere_is_forwarded_to_the_owners_application_server() -> None:
    others = FakeInstances({"other:1": {1: ("active", 9)}})
    queries = router([FakeThread({})], [member("me", 0), member("other", 1, endpoint="other:1")], others)
    only = queries.query(StateQueryRequest("counts", KeyQuery(key_on(1)))).only_result()
    assert (only.source, only.result, only.instance) == ("active", 9, "other:1")
    assert others.calls == [("other:1", (1,))]


def test_while_the_owner_restores_the_standby_answers_labelled_stale() -> None:
    others = FakeInstances({"other:1": {1: ("restoring", 2)}})
    local = FakeThread({1: ("standby", 7)})
    members = [member("me", 0, endpoint="me:1"), member("other", 1, endpoint="other:1")]
    queries = router([local], members, others, standbys=1)
    only = queries.query(StateQueryRequest("counts", KeyQuery(key_on(1)))).only_result()
    assert (only.source, only.result, only.stale) == ("standby", 7, True)
    required = queries.query(StateQueryRequest("counts", KeyQuery(key_on(1)), require_active=True)).only_result()
    assert required.failure is FailureReason.NOT_ACTIVE and required.result is None


def test_without_a_standby_a_restoring_owner_answers_labelled_restoring() -> None:
    others = FakeInstances({"other:1": {1: ("restoring", 2)}})
    queries = router([FakeThread({})], [member("me", 0), member("other", 1, endpoint="other:1")], others)
    only = queries.query(StateQueryRequest("counts", KeyQuery(key_on(1)))).only_result()
    assert (only.source, only.result, only.stale) == ("restoring", 2, True)


def test_a_range_query_asks_every_partition_and_reports_the_unowned_ones() -> None:
    queries = router([FakeThread({0: ("active", [["a", 1]])})], [member("me", 0)], FakeInstances({}))
    result = queries.query(StateQueryRequest("counts", RangeQuery()))
    assert result.partitions[0].result == [["a", 1]]
    assert result.partitions[1].failure is FailureReason.NOT_PRESENT
    assert result.rows() == [["a", 1]]


def test_an_answer_short_of_the_position_bound_fails_not_up_to_bound() -> None:
    queries = router([FakeThread({0: ("active", 4)})], [member("me", 0, 1)], FakeInstances({}))
    reached = PositionBound.at_least({"events": {0: 10}})
    ahead = PositionBound.at_least({"events": {0: 11}})
    assert queries.query(StateQueryRequest("counts", KeyQuery(key_on(0)), bound=reached)).only_result().ok
    short = queries.query(StateQueryRequest("counts", KeyQuery(key_on(0)), bound=ahead)).only_result()
    assert short.failure is FailureReason.NOT_UP_TO_BOUND and short.position == {"events": {0: 10}}


@pytest.mark.parametrize(
    ("request_", "status", "message"),
    [
        (StateQueryRequest("nope", KeyQuery("a")), 404, "unknown store 'nope' (stores: counts)"),
        (StateQueryRequest("counts", WindowKeyQuery("a", 0, 1)), 400, "a WindowKeyQuery needs a window store"),
        (StateQueryRequest("counts", KeyQuery(12)), 400, "does not fit its key serde"),
        (StateQueryRequest("counts", RangeQuery(), partitions=(5,)), 400, "has partitions 0..1, not [5]"),
    ],
)
def test_bad_queries_are_refused_with_a_status_and_a_message(
    request_: StateQueryRequest, status: int, message: str
) -> None:
    queries = router([FakeThread({})], [member("me", 0, 1)], FakeInstances({}))
    with pytest.raises(QueryError, match=re.escape(message)) as info:
        queries.query(request_)
    assert info.value.status == status


def test_key_metadata_names_the_owner_and_its_standby_with_their_endpoints() -> None:
    members = [member("me", 0, endpoint="me:1"), member("other", 1, endpoint="other:1")]
    queries = router([FakeThread({})], members, FakeInstances({}), standbys=1)
    metadata = queries.query_metadata_for_key("counts", key_on(1))
    assert (metadata.partition, metadata.active, metadata.standbys) == (1, ("other", "other:1"), (("me", "me:1"),))
    everyone = {m.instance: m for m in queries.metadata_for_all_clients()}
    assert everyone["me"].stores == {"counts": [0]} and everyone["me"].standby_stores == {"counts": [1]}
