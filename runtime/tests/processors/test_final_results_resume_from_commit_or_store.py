"""Where ``EmitStrategy.on_window_close()`` final results resume after a restart or a move
(``streamapp.processors.windowed.base.FinalResults``): the committed close time when the commit metadata holds one,
else the close time derived from the restored store."""

from __future__ import annotations

from typing import Any

from streamapp.processors.windowed.base import FinalResults, derived_close_time

SIZE, GRACE = 10, 5


def upper_of(close_time: int) -> int:
    """Tumbling windows of ``SIZE`` ms: the largest window start closed at ``close_time``."""
    return close_time - SIZE


def final_results(store_stream_time: int) -> FinalResults:
    def fetch(lower: int, upper: int) -> list[Any]:
        return []

    return FinalResults(lambda: store_stream_time, fetch, lambda *record: None)


def test_the_committed_close_time_wins_over_the_restored_stores() -> None:
    final = final_results(store_stream_time=10)
    final.restore_committed(12)

    assert final.resumed and final.last_close_time == 12  # the processor does not call resume() again


def test_a_commit_that_names_no_emission_resumes_as_nothing_emitted() -> None:
    final = final_results(store_stream_time=40)
    final.restore_committed(-1)

    assert final.resumed and final.last_close_time == -1


def test_without_metadata_the_close_time_is_the_stores_stream_time_minus_the_lag() -> None:
    final = final_results(store_stream_time=30)
    final.resume(GRACE, upper_of)

    assert final.last_close_time == 25 == derived_close_time(30, GRACE, upper_of)


def test_without_metadata_a_store_before_any_closed_window_resumes_as_nothing_emitted() -> None:
    assert derived_close_time(10, GRACE, upper_of) == -1  # 10 - 5 = 5: no window [start, start + 10) ended
    assert derived_close_time(-1, GRACE, upper_of) == -1  # an empty store
