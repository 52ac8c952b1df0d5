"""Node agent: a small kubelet that runs the pods bound to one Node as real local processes.

Test infrastructure for the local stack (no container engine runs here). It registers a Node, keeps its
Lease and Ready condition fresh, provisions local PersistentVolumes for Pending claims, and runs each
pod's containers as processes in a private mount namespace with the pod's volumes bind-mounted at their
mountPaths and the pod's own loopback IP (127.0.100.N). Start it with ``python -m e2e.nodeagent``.
"""
