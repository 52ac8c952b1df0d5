"""Pod IP allocation from the loopback range 127.0.100.0/24.

Linux routes all of 127.0.0.0/8 to ``lo``, so a process can bind 127.0.100.N without any setup and
pods of one StatefulSet can all listen on the same port. Addresses .2-.254 are handed out (.0, .1 and
.255 are skipped); the lowest free one first. Thread-safe.
"""

from __future__ import annotations

import ipaddress
import threading

POD_NETWORK = ipaddress.ip_network("127.0.100.0/24")


class PodIPExhausted(Exception):
    """All pod IPs are in use."""


class PodIPAllocator:
    """Allocates one pod IP per pod UID; ``release`` frees it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_uid: dict[str, str] = {}

    def claim(self, uid: str, ip: str) -> bool:
        """Take a specific ``ip`` for ``uid`` (resuming after an agent restart); False if taken/invalid."""
        with self._lock:
            try:
                if ipaddress.ip_address(ip) not in POD_NETWORK:
                    return False
            except ValueError:
                return False
            owner = next((u for u, a in self._by_uid.items() if a == ip), None)
            if owner not in (None, uid):
                return False
            self._by_uid[uid] = ip
            return True

    def allocate(self, uid: str) -> str:
        """The IP of ``uid``: its existing one, else the lowest free. Raises PodIPExhausted."""
        with self._lock:
            if uid in self._by_uid:
                return self._by_uid[uid]
            used = set(self._by_uid.values())
            for host in range(2, 255):
                ip = str(POD_NETWORK.network_address + host)
                if ip not in used:
                    self._by_uid[uid] = ip
                    return ip
        raise PodIPExhausted(f"no free pod IP in {POD_NETWORK}")

    def release(self, uid: str) -> None:
        """Free the IP of ``uid`` (no-op when it has none)."""
        with self._lock:
            self._by_uid.pop(uid, None)
