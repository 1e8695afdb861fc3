"""An MoE block's token dispatch and combine on the cluster: the all-to-all (or all-gather) over the EP group,
priced on the tiers the group spans.

Each device holds ``nbytes`` of routed token vectors to spread evenly over the n ranks of its EP group. The k - 1
peers inside its node take (k - 1) / n of them over the node's fabric (NVLink), the n - k peers in other nodes
take (n - k) / n over the device's own NIC (every GPU of a DGX node has one, so each device's share of the slow
tier is its own); the two run at once, so the slower of the two sets the time, plus one latency of the slowest
tier crossed. The all-gather dispatcher instead gathers every token of the group on every rank (a ring
all-gather of n times the device's tokens, then a local selection; its combine is the reduce-scatter).

DeepEP's normal kernels (deepseek-ai/DeepEP README, "Normal kernels with NVLink and RDMA forwarding", H800 with
~160 GB/s NVLink and one CX7 400 Gb/s NIC (~50 GB/s) per GPU, DeepSeek-V3's pretraining setting) reach at most
these bottleneck bandwidths, used as the ceiling of each tier: intranode EP 8 153 GB/s dispatch / 158 GB/s combine
(NVLink); internode EP 16 43 / 43, EP 32 58 / 57, EP 64 51 / 50 GB/s (RDMA).
"""
from __future__ import annotations

from dataclasses import dataclass

from phaze.hardware.cluster import Cluster, NetworkTier

GB = 1e9
DEEPEP_INTRANODE_Bps = 153 * GB  # the dispatch's (the combine's 158 is higher)
DEEPEP_INTERNODE_Bps = {16: 43 * GB, 32: 58 * GB, 64: 51 * GB}  # dispatch (combine within 1 GB/s)


@dataclass(frozen=True)
class EpNetwork:
    """The tiers an EP group of ``group_size`` ranks (``stride`` devices apart) spans: ``inner`` (the fastest,
    inside a node) with ``members_per_node`` of the group on it, and ``outer`` (None: the group fits in a
    node), with the dispatcher that moves the tokens."""

    group_size: int
    inner: NetworkTier
    members_per_node: int
    outer: NetworkTier | None
    dispatcher: str = "alltoall"

    @classmethod
    def of(cls, cluster: Cluster, group_size: int, stride: int, dispatcher: str) -> "EpNetwork":
        inner = cluster.tiers[0]
        span = (group_size - 1) * stride + 1
        if span <= inner.devices_per_group:
            return cls(group_size, inner, group_size, None, dispatcher)
        per_node = max(1, inner.devices_per_group // stride)
        return cls(group_size, inner, min(per_node, group_size), cluster.tier_for_group(group_size, stride, "ep"),
                   dispatcher)


def _deepep_ceiling(n: int) -> float:
    """DeepEP's internode bottleneck bandwidth for an EP group of n (the nearest measured size)."""
    sizes = sorted(DEEPEP_INTERNODE_Bps)
    near = min(sizes, key=lambda s: (abs(s - n), s))
    return DEEPEP_INTERNODE_Bps[near]


def dispatch_latency_s(nbytes: float, net: EpNetwork) -> float:
    """Seconds of one dispatch (or combine) of ``nbytes`` per device over the EP group (module doc)."""
    n = net.group_size
    if n <= 1 or nbytes <= 0:
        return 0.0
    inner_Bps = net.inner.effective_bandwidth_Bps
    outer_Bps = net.outer.effective_bandwidth_Bps if net.outer is not None else 0.0
    if net.dispatcher == "deepep":
        inner_Bps = min(inner_Bps, DEEPEP_INTRANODE_Bps)
        outer_Bps = min(outer_Bps, _deepep_ceiling(n)) if net.outer is not None else 0.0
    k = net.members_per_node
    if net.dispatcher == "allgather":  # every rank receives every other rank's tokens (ring all-gather)
        slow_Bps = outer_Bps if net.outer is not None else inner_Bps
        latency = (net.outer or net.inner).latency_s
        return (n - 1) * nbytes / slow_Bps + (n - 1) * latency
    inner_s = nbytes * (k - 1) / n / inner_Bps
    outer_s = nbytes * (n - k) / n / outer_Bps if net.outer is not None else 0.0
    return max(inner_s, outer_s) + (net.outer or net.inner).latency_s


@dataclass(frozen=True)
class MoeNetwork:
    """Where an MoE block's collectives run: the EP group's dispatch/combine (``ep``), the expert-tensor-parallel
    group's all-gather / reduce-scatter (on ``etp_tier``), and whether the dispatch/combine overlap the other
    microbatch's compute (``overlap``)."""

    ep: EpNetwork | None
    etp_tier: NetworkTier | None
    overlap: bool = False

    def latency_s(self, op) -> float:
        from phaze.cost.network import collective_latency_s

        if op.group == "ep":
            return dispatch_latency_s(op.bytes, self.ep)
        return collective_latency_s(op, self.etp_tier)


# Megatron-Core's 1F1B all-to-all overlap (--overlap-moe-expert-parallel-comm, with delay_wgrad_compute) runs one
# microbatch's dispatch/combine while the other microbatch computes: in the steady state each all-to-all hides
# behind the other's compute of the same layer, so what stays exposed is the all-to-all time beyond that compute.
def a2a_exposed_s(graph, lat: list[float]) -> list[float]:
    """``lat`` with the EP all-to-alls hidden behind the layer's other work: their total is cut to what exceeds
    the rest of the layer's time (the other microbatch's compute they overlap)."""
    idx = [i for i, op in enumerate(graph.ops) if getattr(op, "group", "tp") == "ep"]
    if not idx:
        return lat
    a2a = sum(lat[i] for i in idx)
    rest = sum(lat) - a2a
    exposed = max(0.0, a2a - rest)
    out = list(lat)
    for i in idx:
        out[i] = lat[i] / a2a * exposed if a2a > 0 else 0.0
    return out


def moe_time_parts_s(graph, lat: list[float], load_factor: float) -> tuple[float, float]:
    """(all-to-all seconds, routing-imbalance seconds) of an MoE block's ``graph`` with op times ``lat`` (after
    any overlap): the EP dispatch/combine, and the busiest EP rank's time beyond the mean rank's on the work that
    scales with its load (its experts and its all-to-alls): (1 - 1 / load_factor) of it."""
    a2a = sum(t for op, t in zip(graph.ops, lat) if getattr(op, "group", "tp") == "ep")
    experts = sum(t for op, t in zip(graph.ops, lat) if op.name.split(".")[-1].startswith("expert_")
                  or op.name.startswith(("expert_", "recompute.expert_")))
    return a2a, (1.0 - 1.0 / load_factor) * (experts + a2a) if load_factor > 1 else 0.0
