"""The network between accelerators: tiers from fastest (inside a node) to slowest (across the cluster).

A cluster can also be read from a YAML/JSON file (``load_cluster_file``; format in docs/cluster-file.md):
its tiers with devices per group, bandwidth, latency and efficiency, and optionally which tier each kind
of collective uses at least (``collectives: {tp: ..., dp: ..., pp: ..., cp: ...}``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from phaze.errors import ConfigError, InfeasibleError
from phaze.limits import check

# The groups a training plan communicates in: tensor-parallel collectives, data-parallel gradient
# synchronisation, pipeline point-to-point sends, the context-parallel K/V ring.
COLLECTIVE_ROLES = ("tp", "dp", "pp", "cp")


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
    last tier spanning every device. ``pinned``: (role, tier name) pairs: that role's collectives use at
    least that tier (the slower of it and the tier their group spans)."""

    name: str
    num_devices: int
    tiers: tuple[NetworkTier, ...]
    pinned: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.num_devices <= 0:
            raise ConfigError(f"cluster {self.name!r}: num_devices must be positive, got {self.num_devices}")
        if not self.tiers:
            raise ConfigError(f"cluster {self.name!r}: needs at least one network tier")
        names = [t.name for t in self.tiers]
        for role, tier in self.pinned:
            if role not in COLLECTIVE_ROLES:
                raise ConfigError(f"cluster {self.name!r}: unknown collective {role!r}; use "
                                  f"{', '.join(COLLECTIVE_ROLES)}")
            if tier not in names:
                raise ConfigError(f"cluster {self.name!r}: collective {role!r} names tier {tier!r}, which is not "
                                  f"one of its tiers ({', '.join(names)})")

    def tier_for_group(self, group_size: int, stride: int = 1, role: str | None = None) -> NetworkTier:
        """The slowest tier a group of ``group_size`` devices spaced ``stride`` apart must cross, with
        devices numbered so that consecutive ids share the fastest tier; a ``role`` pinned to a slower
        tier uses that one (a group of one device never communicates)."""
        span = (group_size - 1) * stride + 1
        idx = len(self.tiers) - 1
        for i, tier in enumerate(self.tiers):
            if span <= tier.devices_per_group:
                idx = i
                break
        if role is not None and group_size > 1:
            names = [t.name for t in self.tiers]
            for r, name in self.pinned:
                if r == role:
                    idx = max(idx, names.index(name))
        return self.tiers[idx]

    def ring_tier(self, group_size: int, stride: int = 1, role: str | None = None) -> NetworkTier:
        """The tier a ring collective (all-reduce, reduce-scatter, all-gather) of the group runs at: that of
        ``tier_for_group``, with the bandwidth of every group member inside one group of the tier below.

        A ring enters and leaves each node once, and NCCL runs one ring (channel) per NIC of the group's
        GPUs in the node, so with k members per node the k NICs carry the inter-node traffic together: the
        bus bandwidth is min(k x one device's share of the slow tier, the fast tier's), not one device's
        share (``bandwidth_Bps`` is per device). NCCL's maintainers: "Ring Allreduce requires data to go
        through each GPU and enter/exit the node once" (github NVIDIA/nccl issue #687); measured there on
        DGX-2 nodes, a 1.6 GB ring all-reduce over 8 GPUs takes 363 ms at 1 GPU per node, 173 ms at 2 GPUs
        (2 NICs) per node (NVIDIA/nccl issue #569). A point-to-point send stays at one device's share."""
        tier = self.tier_for_group(group_size, stride, role)
        idx = self.tiers.index(tier)
        if group_size <= 1 or idx == 0:
            return tier
        below = self.tiers[idx - 1]
        k = max(1, min(group_size, below.devices_per_group // max(1, stride)))
        if k == 1:
            return tier
        bw = min(k * tier.effective_bandwidth_Bps, below.effective_bandwidth_Bps)
        return NetworkTier(tier.name, tier.devices_per_group, bw, tier.latency_s, 1.0)

    def with_devices(self, num_devices: int) -> "Cluster":
        """The same network with at most its own number of devices (a plan on part of it)."""
        if not 0 < num_devices <= self.num_devices:
            raise InfeasibleError(f"{num_devices} devices requested but cluster {self.name!r} has "
                                  f"{self.num_devices}; lower --devices or use a larger cluster")
        return replace(self, num_devices=num_devices)


_TIER_FIELDS = {"name": "str", "devices_per_group": "pos_int", "bandwidth_Bps": "pos_float",
                "latency_s": "nonneg_float", "efficiency": "pos_float"}
_FILE_FIELDS = {"name": "str", "devices": "pos_int", "tiers": "any", "collectives": "any"}
ALL_DEVICES = 2**62  # the devices_per_group of a tier that spans the whole cluster


def cluster_from_mapping(data, source: str, num_devices: int | None = None) -> Cluster:
    """A Cluster from a parsed cluster file (docs/cluster-file.md); every problem is one ConfigError line.
    ``num_devices``: the devices a plan may use (default: the file's ``devices``, required then)."""
    from phaze.filefields import check_fields

    data = check_fields(data, _FILE_FIELDS, source, ("tiers",), "cluster fields")
    tiers_in = data["tiers"]
    if not isinstance(tiers_in, list) or not tiers_in:
        raise ConfigError(f"{source}: 'tiers' must be a non-empty list of tiers (name, devices_per_group, "
                          f"bandwidth_Bps, latency_s, efficiency), fastest first")
    tiers = []
    for i, t in enumerate(tiers_in):
        where = f"{source}: tiers[{i}]"
        last = i == len(tiers_in) - 1
        if isinstance(t, dict) and last and t.get("devices_per_group", "all") == "all":
            t = {k: v for k, v in t.items() if k != "devices_per_group"}
        req = ("name", "bandwidth_Bps", "latency_s") + (() if last else ("devices_per_group",))
        f = check_fields(t, _TIER_FIELDS, where, req, "tier fields")
        for k, limit in (("devices_per_group", "devices"), ("bandwidth_Bps", "link_bandwidth_Bps"),
                         ("latency_s", "link_latency_s")):
            if k in f:
                check(limit, f[k], f"{where}: {k}")
        if f.get("efficiency", 1.0) > 1:
            raise ConfigError(f"{where}: efficiency must be in (0, 1], got {f['efficiency']}")
        f.setdefault("devices_per_group", ALL_DEVICES)
        tiers.append(NetworkTier(f["name"], int(f["devices_per_group"]), f["bandwidth_Bps"], f["latency_s"],
                                 f.get("efficiency", 1.0)))
    for a, b in zip(tiers, tiers[1:]):
        if b.devices_per_group <= a.devices_per_group:
            raise ConfigError(f"{source}: tier {b.name!r} must group more devices than {a.name!r} "
                              f"({b.devices_per_group} <= {a.devices_per_group}); list tiers fastest (smallest) first")
    if len({t.name for t in tiers}) != len(tiers):
        raise ConfigError(f"{source}: tier names must be distinct")
    coll = data.get("collectives") or {}
    if not isinstance(coll, dict):
        raise ConfigError(f"{source}: 'collectives' must map tp / dp / pp to a tier name")
    cap = data.get("devices")
    if cap is not None:
        check("devices", cap, f"{source}: devices")
    n = num_devices if num_devices is not None else cap
    if n is None:
        raise ConfigError(f"{source}: give 'devices' in the file or the number of devices to use")
    if cap is not None and n > cap:
        raise InfeasibleError(f"{n} devices requested but cluster file {source} has {cap}; lower --devices")
    tiers[-1] = replace(tiers[-1], devices_per_group=max(n, tiers[-1].devices_per_group if len(tiers) > 1 else n))
    try:
        return Cluster(str(data.get("name", source)), int(n), tuple(tiers),
                       tuple((str(k), str(v)) for k, v in coll.items()))
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None


def load_cluster_file(path: str, num_devices: int | None = None) -> Cluster:
    """A Cluster from a YAML/JSON file (docs/cluster-file.md); the file is read by ``phaze.fileio`` (size,
    binary, nesting and YAML-alias limits: one line on any problem)."""
    from pathlib import Path

    from phaze.fileio import read_data_file

    data = read_data_file(path, "cluster file")
    if isinstance(data, dict):
        data.setdefault("name", Path(path).stem)
    return cluster_from_mapping(data, f"cluster file {path}", num_devices)
