"""The StreamReplay controller (docs/replay.md "The operator"): a replay of a StreamApp's history as a Spark
batch job in a Kubernetes Job, then, in ``handover`` mode, a new version of the app that starts from the
replay's end offsets with the state the replay wrote.

- ``resources``: the typed ``StreamReplay`` spec and status (the CRD's single source, ``crdgen``);
- ``decisions``: pure decisions on plain data: the offset ranges, the replay plan, the Job and its ConfigMap,
  the Job's phase, the new version's StreamApp, the handover's steps;
- ``reconcile``: the reconcile, as named steps over ``streamapp_operator.steps``.
"""
