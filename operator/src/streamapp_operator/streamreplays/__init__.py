"""The StreamReplay controller (docs/replay.md "The operator"): a replay of a StreamApp's history as a Spark
batch job in a Kubernetes Job, then, in ``handover`` mode, a new version of the app that starts from the
replay's end offsets with the state the replay wrote.

- ``resources``: the typed ``StreamReplay`` spec and status (the CRD's single source, ``crdgen``);
- pure decisions on plain data, one topic each: ``offset_range`` (the ``[from, to)`` offsets), ``replay_plan`` (the
  plan and the ids it runs under), ``job_manifests`` (the Job, its ConfigMap and ServiceAccount),
  ``spark_executors`` (the pods' layout, the executors' template), ``job_reports`` (the Job's phase and reports),
  ``job_start``, ``handover`` (its steps and the new version), ``claims`` (replays in each other's way),
  ``overlap``, ``takeover``, ``app_code``, ``dead_letters``;
- the reconcile: ``observe`` -> ``decide`` (pure) -> the steps (``checks``, ``range_steps``, ``job_steps``,
  ``handover_steps``, ``cleanup``; over ``context`` and ``jobs``) -> ``report``, in ``reconcile``; ``handlers``
  registers it with kopf.
"""
