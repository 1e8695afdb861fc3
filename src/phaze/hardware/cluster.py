"""The network between accelerators: tiers from fastest (inside a node) to slowest (across the cluster)."""
from __future__ import annotations

from dataclasses import dataclass

from phaze.errors import ConfigError


@dataclass(frozen=True)
class NetworkTier:
    """Devices are grouped ``devices_per_group`` at a time on this tier (e.g. 8 GPUs on NVLink in a node).
    ``bandwidth_Bps`` is per device per direction; ``efficiency`` the achievable fraction of it."""

    name: str
    devices_per_group: int
    bandwidth_Bps: float
    latency_s: float
    efficiency: float = 1.0

    @property
    def effective_bandwidth_Bps(self) -> float:
        return self.bandwidth_Bps * self.efficiency


@dataclass(frozen=True)
class Cluster:
    """``num_devices`` identical accelerators; ``tiers`` ordered by increasing devices_per_group, the
    last tier spanning every device."""

    name: str
    num_devices: int
    tiers: tuple[NetworkTier, ...]

    def __post_init__(self) -> None:
        if self.num_devices <= 0:
            raise ConfigError(f"cluster {self.name!r}: num_devices must be positive, got {self.num_devices}")
        if not self.tiers:
            raise ConfigError(f"cluster {self.name!r}: needs at least one network tier")

    def tier_for_group(self, group_size: int, stride: int = 1) -> NetworkTier:
        """The slowest tier a group of ``group_size`` devices spaced ``stride`` apart must cross, with
        devices numbered so that consecutive ids share the fastest tier."""
        span = (group_size - 1) * stride + 1
        for tier in self.tiers:
            if span <= tier.devices_per_group:
                return tier
        return self.tiers[-1]
