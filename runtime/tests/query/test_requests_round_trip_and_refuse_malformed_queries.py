"""The IQv2 request and result model (``streamapp.query.requests``): what travels over HTTP reads back the same,
a malformed body is a QueryError naming the field, and a position bound compares offsets per partition."""

from __future__ import annotations

import json

import pytest
from streamapp.query.requests import (
    FailureReason,
    KeyQuery,
    PositionBound,
    QueryError,
    QueryResult,
    RangeQuery,
    StateQueryRequest,
    StateQueryResult,
    WindowKeyQuery,
    WindowRangeQuery,
    query_from_dict,
)


@pytest.mark.parametrize(
    "request_",
    [
        StateQueryRequest("s", KeyQuery("a")),
        StateQueryRequest("s", RangeQuery("a", None), partitions=(0, 2), require_active=True),
        StateQueryRequest("s", WindowKeyQuery(["composite", 1], 0, 100)),
        StateQueryRequest("s", WindowRangeQuery(5, 10), bound=PositionBound.at_least({"t": {0: 3}})),
    ],
)
def test_a_request_reads_back_from_its_json_body(request_: StateQueryRequest) -> None:
    assert query_from_dict(json.loads(json.dumps(request_.to_dict()))) == request_


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "must be a JSON object"),
        ({"type": "key", "key": "a"}, "'store' .* is required"),
        ({"store": "s", "type": "scan"}, "'type' must be key, range, window_key or window_range"),
        ({"store": "s", "type": "key"}, "'key' is required"),
        ({"store": "s", "type": "window_key", "key": "a", "time_from": "0", "time_to": 1}, "'time_from' must be"),
        ({"store": "s", "type": "range", "partitions": [-1]}, "'partitions' must be a list"),
        ({"store": "s", "type": "range", "position_bound": {"t": {"x": 1}}}, "malformed query"),
    ],
)
def test_a_malformed_body_is_refused_naming_what_is_wrong(body: object, message: str) -> None:
    with pytest.raises(QueryError, match=message) as info:
        query_from_dict(body)  # type: ignore[arg-type]
    assert info.value.status == 400


def test_a_position_bound_holds_when_every_bounded_partition_is_reached() -> None:
    bound = PositionBound.at_least({"t": {0: 5, 1: 2}})
    assert bound.satisfied_by({"t": {0: 5, 1: 9}, "u": {0: 1}})
    assert not bound.satisfied_by({"t": {0: 4, 1: 9}})
    assert not bound.satisfied_by({"t": {0: 5}}), "a partition the answer has no position for is not reached"
    assert PositionBound.unbounded().satisfied_by({})


def test_results_are_labelled_stale_unless_a_running_active_task_answered() -> None:
    active = QueryResult(0, "active", 1, {"t": {0: 3}})
    standby = QueryResult(1, "standby", 2, {"c": {1: 4}})
    failed = QueryResult(2, failure=FailureReason.NOT_PRESENT, message="gone")
    result = StateQueryResult("s", {0: active, 1: standby, 2: failed})
    assert (active.stale, standby.stale, failed.stale, result.stale) == (False, True, False, True)
    assert result.position == {"t": {0: 3}, "c": {1: 4}}
    assert StateQueryResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
