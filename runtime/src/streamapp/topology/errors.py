"""The one error type of an invalid topology description."""

from __future__ import annotations


class TopologyError(ValueError):
    """A topology description is invalid or cannot be resolved.

    The message names the node, store or topic and the problem, e.g.
    ``node 'count': input 'x' does not exist``, so it can be shown as is to a user (CLI output, a
    StreamApp's ``Degraded`` condition).
    """
