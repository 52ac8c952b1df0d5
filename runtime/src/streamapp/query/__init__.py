"""Interactive queries (Kafka Streams' IQv2, KIP-796): read a running application's state stores.

- ``streamapp.query.requests``: the queries (``KeyQuery``, ``RangeQuery``, ``WindowKeyQuery``,
  ``WindowRangeQuery``), ``StateQueryRequest``, ``PositionBound`` and the labelled results;
- ``streamapp.query.metadata``: which instance owns a key's task, with its standbys (``KeyQueryMetadata``,
  ``StreamsMetadata``), from the consumer group's description and the advertised ``application.server`` endpoints;
- ``streamapp.query.channel``: the request/response pipe between the supervisor and a stream-thread worker;
- ``streamapp.query.router``: answers a request for the whole application (local workers, or forwarded over HTTP
  to the owning instance, or its standby while the owner restores).

See docs/interactive-queries.md and docs/adr/0012-query-endpoints.md.
"""
