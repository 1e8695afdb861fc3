"""A designed chip's off-chip network (issue 34 item 5): a scale-up domain and a scale-out tier, with the PHY area
and power they add to the chip, what they cost, and the ``Cluster`` a plan sees.

A network is ``ChipNetwork(scale_up_chips, scale_up_Bps, topology, scale_out_Bps)``: ``scale_up_chips`` chips
share a scale-up domain in which each chip sends ``scale_up_Bps`` (one way, all its scale-up links together);
the domains are joined by a scale-out tier at ``scale_out_Bps`` per chip (one way).

Performance (``network_cluster``): two tiers, fastest first (``phaze.hardware.cluster``):
- scale-up, ``scale_up_chips`` devices per group. A ``switch`` gives every group inside the domain the chip's
  full ``scale_up_Bps``. A ``torus`` of ``torus_dims(n)`` dimensions spreads the chip's links over its
  dimensions and a collective runs on the ring of one dimension: ``scale_up_Bps / dims`` (a lower bound of what
  a multi-dimensional all-reduce reaches, which uses every dimension at once);
- scale-out, every device, ``scale_out_Bps`` per chip (a ring crossing it with k members in a domain gets k
  chips' scale-out links, up to the scale-up bandwidth: ``Cluster.ring_tier``).
Both tiers are ideal like the chip template (no latency, efficiency 1), so the axis trades bandwidth only.
A domain of at least the plan's devices has no scale-out tier. Torus dimensions: ``min(3, ceil(log2(n) / 2))``
(4 chips: a ring; 8: 2-D, 4 x 2; 64 and more: 3-D, as TPU v4's 4 x 4 x 4 cube and its 4,096-chip pod).

Area: PHY (SerDes) area per one-way B/s, ``PHY_MM2_PER_BPS``, on both tiers' bandwidth; at the die's edge, so
it adds to the die (its cost, the area budget) but not to the on-chip wire distances of ``phaze.hardware.power``.
Power: ``SERDES_J_PER_BIT`` per bit sent (a link's transmitter and receiver), every link busy at peak.
Cost: per one-way B/s, the switch ports and optics the chip's links need (``network_usd``), added to the TCO
(``phaze.hardware.cost``). A scale-up tier's copper cables are priced in neither topology: a switch's scale-up
is its ports, a torus's nothing beyond the chips' own SerDes (in the die's area, so in its cost), as a torus
needs no switch. So the reference's TPU v4 ICI costs $0 here; its optical circuit switches and optics, which
join its 4 x 4 x 4 cubes, are "<5% of system cost" (Jouppi et al., ISCA 2023), left out like the cables.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from phaze.errors import ConfigError

TOPOLOGIES = ("torus", "switch")

# PHY area. Gangasani et al. (IBM), "A 1.1-pJ/b/Lane, 1.8-Tb/s Chiplet Using 113-Gb/s PAM-4 Transceiver ...",
# IEEE Solid-State Circuits Letters 8:33-36, 2025 (doi 10.1109/LSSC.2025.3526877): 0.22 mm^2 per lane at 113 Gb/s
# in 5 nm (a lane: one transmitter and one receiver, so 113 Gb/s each way). Scaled to the area model's 22 nm by the
# square of the feature size, (22/5)^2, as the on-chip network's router is (``phaze.hardware.chip_area``): mixed-
# signal circuits shrink less than that, so this overstates a 22 nm lane; the lane is an extra-short-reach one (a
# board-reach lane is larger), which understates it. Per one-way B/s: 0.22 * 19.36 / (113e9 / 8) mm^2.
PHY_LANE_MM2 = 0.22
PHY_LANE_NODE_NM = 5.0
PHY_LANE_BITS_PER_S = 113e9
NODE_NM = 22.0
PHY_MM2_PER_BPS = PHY_LANE_MM2 * (NODE_NM / PHY_LANE_NODE_NM) ** 2 / (PHY_LANE_BITS_PER_S / 8.0)

# PHY energy. Dickson et al. (IBM), "A 1.4 pJ/bit, Power-Scalable 16x12 Gb/s Source-Synchronous I/O With DFE
# Receiver in 32 nm SOI CMOS Technology", IEEE JSSC 2015: 1.9 pJ/b over 20" of Megtron-6 board traces (1.4 pJ/b
# over 0.75"). A board-reach link at 32 nm, the node nearest the model's 22 nm; not scaled (an I/O's energy is set
# by the channel's loss and the signal swing more than by the node). Both tiers: a scale-out link is the chip's
# SerDes to a NIC or optical module at the board's edge; the module's own power is not the chip's (not counted).
SERDES_J_PER_BIT = 1.9e-12

# Cost. A 64-port 400 Gb/s InfiniBand switch at $36,000 (FS.com's, Aug 2024) and, for 1,024 H100s (128 nodes) on a
# two-tier fat tree, 48 such switches and $2,621,440 of transceivers and cables: the public cluster cost sheet
# "H100 cluster cost" (docs.google.com/spreadsheets/d/1Ft3RbeZ-w43kYSiLfYc1vxO41mK5lmJpcPC9GOYHAWc, rows 4 and
# 17-18; the NICs are in its node price, not here). Each GPU has 400 Gb/s = 50e9 B/s one way, so
# - scale-out (switched, optical, two tiers): (48 * 36,000 + 2,621,440) / 1,024 / 50e9 = $84.95 per GB/s;
# - scale-up switch (one tier, copper: one switch port per 50 GB/s, cables not priced): 36,000 / 64 / 50e9.
_SWITCH_USD, _SWITCH_PORTS, _PORT_BPS = 36_000.0, 64, 400e9 / 8.0
SCALE_OUT_USD_PER_BPS = (48 * _SWITCH_USD + 2_621_440.0) / 1024 / _PORT_BPS
SWITCH_USD_PER_BPS = _SWITCH_USD / _SWITCH_PORTS / _PORT_BPS
TORUS_USD_PER_BPS = 0.0


@dataclass(frozen=True)
class ChipNetwork:
    """One chip's off-chip network (module docstring); bandwidths per chip, one way, in B/s. ``scale_out_Bps``
    0: none (the scale-up domain must then hold every device of a plan)."""

    scale_up_chips: int
    scale_up_Bps: float
    topology: str
    scale_out_Bps: float

    def __post_init__(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise ConfigError(f"network topology must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}")
        if isinstance(self.scale_up_chips, bool) or not isinstance(self.scale_up_chips, (int, np.integer)) \
                or self.scale_up_chips < 2:
            raise ConfigError(f"network scale-up domain must be an integer of at least 2 chips, got "
                              f"{self.scale_up_chips!r}")
        for name, v, zero_ok in (("scale-up", self.scale_up_Bps, False), ("scale-out", self.scale_out_Bps, True)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
                    or (v == 0 and not zero_ok):
                raise ConfigError(f"network {name} bandwidth must be a positive finite number of B/s, got {v!r}")

    @property
    def dims(self) -> int:
        """Dimensions of the torus (1 for a switch)."""
        return torus_dims(self.scale_up_chips) if self.topology == "torus" else 1

    @property
    def group_Bps(self) -> float:
        """What one collective inside the domain gets per chip: all of a switch's, one torus dimension's share."""
        return self.scale_up_Bps / self.dims

    @property
    def name(self) -> str:
        out = f"{self.topology}-{self.scale_up_chips} {self.scale_up_Bps / 1e9:g} GB/s"
        return out + (f" + scale-out {self.scale_out_Bps / 1e9:g} GB/s" if self.scale_out_Bps else "")

    def to_dict(self) -> dict:
        return {"name": self.name, "scale_up_chips": int(self.scale_up_chips), "scale_up_Bps": float(self.scale_up_Bps),
                "topology": self.topology, "torus_dims": self.dims if self.topology == "torus" else None,
                "scale_up_group_Bps": self.group_Bps, "scale_out_Bps": float(self.scale_out_Bps),
                "phy_area_mm2": float(phy_area_mm2(self)), "peak_power_w": float(network_power_w(self)),
                "network_usd": float(network_usd(self))}


# A chip file's optional ``network`` mapping (docs/chip-file.md): the four fields that define a ChipNetwork.
FILE_FIELDS = {"scale_up_chips": "pos_int", "scale_up_Bps": "pos_float", "topology": "str",
               "scale_out_Bps": "nonneg_float"}


def network_from_mapping(data, source: str) -> ChipNetwork:
    """A ChipNetwork from a chip file's ``network`` mapping (``FILE_FIELDS``); one-line ConfigError naming
    ``source`` and every bad field."""
    from phaze.filefields import check_fields

    d = check_fields(data, FILE_FIELDS, source, tuple(FILE_FIELDS), "network fields")
    try:
        return ChipNetwork(**d)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None


def file_fields(net: ChipNetwork) -> dict:
    """The ``network`` mapping of a chip file (``network_from_mapping`` reads it back to ``net``)."""
    return {"scale_up_chips": int(net.scale_up_chips), "scale_up_Bps": float(net.scale_up_Bps),
            "topology": net.topology, "scale_out_Bps": float(net.scale_out_Bps)}


def torus_dims(chips: int) -> int:
    """Dimensions of a torus of ``chips`` (module docstring)."""
    return max(1, min(3, math.ceil(math.log2(chips) / 2)))


def _bw(nets, attr: str) -> np.ndarray:
    return np.asarray([getattr(n, attr) for n in nets], np.float64) if isinstance(nets, (list, tuple)) \
        else np.float64(getattr(nets, attr))


def phy_area_mm2(nets):
    """PHY area (mm^2) of a network (float) or a list of them (array): both tiers' one-way bandwidth x
    PHY_MM2_PER_BPS."""
    return PHY_MM2_PER_BPS * (_bw(nets, "scale_up_Bps") + _bw(nets, "scale_out_Bps"))


def network_power_w(nets):
    """Peak PHY power (W): every link sending at its full rate, SERDES_J_PER_BIT per bit."""
    return SERDES_J_PER_BIT * 8.0 * (_bw(nets, "scale_up_Bps") + _bw(nets, "scale_out_Bps"))


def network_usd(nets):
    """Switch ports, optics and cables of a chip's links (USD): scale-up at the topology's price per B/s,
    scale-out at SCALE_OUT_USD_PER_BPS."""
    one = not isinstance(nets, (list, tuple))
    nets = [nets] if one else nets
    up = np.asarray([n.scale_up_Bps * (SWITCH_USD_PER_BPS if n.topology == "switch" else TORUS_USD_PER_BPS)
                     for n in nets], np.float64)
    out = up + SCALE_OUT_USD_PER_BPS * _bw(list(nets), "scale_out_Bps")
    return float(out[0]) if one else out


def network_cluster(net: ChipNetwork, num_devices: int):
    """The Cluster a plan on ``num_devices`` chips with this network sees (module docstring)."""
    from phaze.hardware.cluster import Cluster, NetworkTier

    shape = f"torus {net.dims}-D" if net.topology == "torus" else "switch"
    up = NetworkTier(f"scale-up ({shape}, {net.scale_up_chips} chips)", min(net.scale_up_chips, num_devices),
                     net.group_Bps, 0.0, 1.0)
    if net.scale_up_chips >= num_devices:
        return Cluster(net.name, num_devices, (up,))
    if net.scale_out_Bps <= 0:
        raise ConfigError(f"network {net.name}: its scale-up domain holds {net.scale_up_chips} chips and it has no "
                          f"scale-out tier, but the plan has {num_devices} devices; lower --devices")
    out = NetworkTier("scale-out", num_devices, float(net.scale_out_Bps), 0.0, 1.0)
    return Cluster(net.name, num_devices, (up, out))


def at_least_as_fast(b: ChipNetwork, a: ChipNetwork) -> bool:
    """True when every collective and send of every plan is at least as fast on ``b`` as on ``a``: ``b`` a switch
    whose domain holds ``a``'s, with at least ``a``'s scale-up and scale-out bandwidth and a scale-up at least
    ``a``'s scale-out (a group ``a`` sends over scale-out may be inside ``b``'s domain). Sufficient, not
    necessary (tested against the clusters' tiers in tests/hardware/test_chip_network.py)."""
    return (b.topology == "switch" and b.scale_up_chips >= a.scale_up_chips and b.scale_up_Bps >= a.scale_up_Bps
            and b.scale_out_Bps >= a.scale_out_Bps and b.scale_up_Bps >= a.scale_out_Bps)


def fastest(nets) -> ChipNetwork:
    """A network at least as fast as each of ``nets`` (``at_least_as_fast``): a switch with the largest domain and
    the largest bandwidths (its scale-up at least every scale-out). What the search's vectorized throughput
    bound of a chip is computed on: an upper bound of the chip on any of its networks."""
    out = max(n.scale_out_Bps for n in nets)
    return ChipNetwork(max(n.scale_up_chips for n in nets), max(max(n.scale_up_Bps for n in nets), out), "switch",
                       out)


def network_axis(space) -> tuple[ChipNetwork, ...]:
    """Every network of a design space's axis (its ``net_*`` fields' product; empty: no axis)."""
    def num(v):  # a number as a float; anything else as given, for ChipNetwork's one-line error
        return float(v) if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) else v

    return tuple(ChipNetwork(n, num(up), topo, num(out)) for n in space.net_scale_up_chips
                 for up in space.net_scale_up_Bps for topo in space.net_topologies for out in space.net_scale_out_Bps)


def undominated(nets, priced: bool) -> tuple[ChipNetwork, ...]:
    """``nets`` less each one another makes redundant: at least as fast (``at_least_as_fast``) with the same PHY
    bandwidth (so the same area and power) and, when ``priced`` (an objective that counts dollars), no dearer.
    A chip with the dropped network can never beat the same chip with the other (same area, power, the cost no
    higher, the throughput no lower): the search's answer is unchanged. Ties keep the first of the list."""
    nets = list(nets)
    out = []
    for i, a in enumerate(nets):
        def beats(b, j) -> bool:
            if j == i or phy_area_mm2(b) != phy_area_mm2(a) or not at_least_as_fast(b, a):
                return False
            if priced and network_usd(b) > network_usd(a):
                return False
            same = at_least_as_fast(a, b) and (not priced or network_usd(a) == network_usd(b))
            return not same or j < i  # of two equivalent networks the first stays
        if not any(beats(b, j) for j, b in enumerate(nets)):
            out.append(a)
    return tuple(out)


# The reference chip's network: TPU v4's inter-chip interconnect, 6 links of 45 GB/s one way = 270 GB/s per chip
# in a 3-D torus of up to 4,096 chips (Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer for Machine
# Learning with Hardware Support for Embeddings", ISCA 2023); no scale-out tier inside a pod.
TPUV4_ICI = ChipNetwork(scale_up_chips=4096, scale_up_Bps=6 * 45e9, topology="torus", scale_out_Bps=0.0)
