"""The StreamApp Kind: a Kafka-Streams-style application run as a StatefulSet (docs/operator.md).

- ``resources``: the typed ``StreamApp`` spec and status (the CRD's single source, ``crdgen``);
- ``observe``: one read of the children, the pods, their ``/status`` and the consumer group; ``pod_status``
  parses what the pods say (their Kubernetes status, the runtime's ``/status``);
- ``validate`` / ``desired`` / ``conditions`` / ``operations`` / ``rollout`` / ``volumes`` / ``autoscale`` /
  ``reset`` / ``upgrade`` / ``restore_progress`` / ``dropped_records``: pure decisions on plain data;
- ``reconcile``: observe -> decide -> the named ``STEPS`` (``streamapp_operator.steps``) -> report;
- ``handlers``: kopf registration of the Kind.
"""
