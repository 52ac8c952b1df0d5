"""The StreamApp operator: kopf handlers for two Kinds, StreamApp and StreamReplay, side by side.

- ``streamapps/``: the StreamApp Kind (a Kafka-Streams-style application run as a StatefulSet);
- ``streamreplays/``: the StreamReplay Kind (a replay of an app's history as a Spark batch Job);
- the floor both Kinds stand on, importing neither: ``steps`` (the step protocol), ``outcomes`` (events,
  problems, the condition transition), ``kinds`` (API group, owner references), ``identity``, ``connection``
  (Kafka connection and credentials), ``wiring`` (kopf plumbing), ``k8s`` (the only importer of the kubernetes
  client), ``kafka`` (the only importer of confluent_kafka), ``kafka_wire``, ``instances``, ``metrics``, ``times``;
- ``main`` (kopf start-up) and ``crdgen`` (one CRD per Kind's ``resources``) on top.

Nothing here is a public Python API; ``.importlinter`` keeps the Kinds apart.
"""
