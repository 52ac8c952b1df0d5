"""Every pod gets its own loopback IP; IPs are reused only after release."""

from __future__ import annotations

from e2e.nodeagent.ipam import PodIPAllocator


def test_pods_get_distinct_ips_and_freed_ips_are_reused() -> None:
    ipam = PodIPAllocator()
    a, b = ipam.allocate("a"), ipam.allocate("b")
    assert (a, b) == ("127.0.100.2", "127.0.100.3")
    assert ipam.allocate("a") == a  # stable per pod
    ipam.release("a")
    assert ipam.allocate("c") == "127.0.100.2"


def test_resumed_pod_keeps_its_reported_ip_unless_taken() -> None:
    ipam = PodIPAllocator()
    assert ipam.claim("old", "127.0.100.40")
    assert not ipam.claim("other", "127.0.100.40")
    assert not ipam.claim("other", "10.0.0.5")  # outside the pod range
    assert ipam.allocate("old") == "127.0.100.40"
