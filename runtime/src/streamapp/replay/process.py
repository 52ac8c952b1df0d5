"""The ``process`` family on the replay: Processor API nodes (``process``, ``process_values``) run in the task with
their stores; stream-time punctuation fires as in the runtime, wall-clock punctuation never does (a replay has no
wall clock)."""

from streamapp.replay.base import FamilyTranslations
from streamapp.topology.nodes.process import ProcessNode, ProcessValuesNode

TRANSLATIONS = FamilyTranslations("process").in_task(ProcessNode, ProcessValuesNode)
