"""The entry module (``kopf run -m streamapp_operator.main``) registers both Kinds under the handler ids it always
had: kopf keeps a handler's progress in each object's annotations by that id (the function's name), so a
renamed handler would make an upgraded operator run a create handler again for every existing object."""

from __future__ import annotations

import kopf
import streamapp_operator.main  # noqa: F401  (registers the handlers)

#: The handler and index ids of the operator before the Kinds moved into streamapps/ and streamreplays/.
RESOURCE_HANDLERS = {
    "reconcile_streamapp",
    "advance_rollout",
    "delete_streamapp",
    "application_ids",
    "reconcile_streamreplay",
    "advance_streamreplay",
    "forget_streamreplay",
    "replay_claims",
}


def test_both_kinds_are_registered_under_their_previous_handler_ids() -> None:
    registry = kopf.get_default_registry()
    ids = {str(h.id) for h in registry._changing.get_all_handlers()}
    ids |= {str(h.id) for h in registry._spawning.get_all_handlers()}
    ids |= {str(h.id) for h in registry._indexing.get_all_handlers()}
    assert ids >= RESOURCE_HANDLERS
    startup = {str(h.id) for h in registry._activities.get_all_handlers()}
    assert {"configure", "configure_streamapps", "configure_replays"} <= startup
