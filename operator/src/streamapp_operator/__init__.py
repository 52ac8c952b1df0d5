"""The StreamApp operator: kopf handlers that run Kafka-Streams-style applications as StatefulSets.

Layers, importing one way: ``main`` (kopf wiring) -> ``reconcile`` (named steps) -> ``observe`` /
``validate`` / ``desired`` / ``conditions`` (pure decisions on plain data) -> ``resources`` (typed spec).
``k8s`` is the only importer of the kubernetes client and ``kafka`` the only importer of confluent_kafka;
``crdgen`` renders the CRD from ``resources``. Nothing here is a public Python API.
"""
