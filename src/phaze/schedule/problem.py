"""The per-layer scheduling problem as plain data, and its result.

Semantics (one layer, one direction, one chip):
- An op of kind "tc" (GEMM) or "vc" (vector op) runs on ``k`` cores of its kind for some ``(k, duration_s)``
  in its ``modes``: one core, a power-of-two subset, or all cores (``phaze.cost.core_modes``). Cores need
  not be contiguous.
- Ops sharing a core never overlap, so an op on all cores of its kind excludes every other op of that kind.
- An op starts only after all its predecessors have ended (``edges`` are (pred, succ) indices).
- Tensor-parallel collectives ("net") occupy the chip's network port (capacity 1, core name "net0"), not
  tensor or vector cores, so they overlap compute wherever the dependencies allow.
- Durations are positive (``build_problem`` floors a zero-cost op at ``MIN_DURATION_S``), so every op
  occupies its cores for a non-empty interval.
- Bandwidth (chips with the on-chip hierarchy): an op's ``rates`` give, per mode, the GLB and HBM bytes
  per second it draws running at full speed, and ``glb_supply_Bps`` / ``hbm_supply_Bps`` what the chip
  delivers. The solvers see the durations only (each op costed as if it ran alone, with the whole supply);
  ``solve`` then re-times their schedule so concurrent ops never draw more than the supply
  (``phaze.schedule.bandwidth``). Empty rates (collectives, the paper's template) draw nothing.
- Fusion rule: none. Every op of the layer graph (a GEMM and its element-wise epilogue included) is
  scheduled as its own op; the graph builder decides what is one op.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal

from phaze.errors import ConfigError

Kind = Literal["tc", "vc", "net"]
Status = Literal["optimal", "feasible", "heuristic"]
KINDS: tuple[str, ...] = ("tc", "vc", "net")
MIN_DURATION_S = 1e-12  # a zero-cost op (e.g. a reshape) still takes 1 ps, so intervals are never empty


@dataclass(frozen=True)
class SchedOp:
    """One op: ``modes`` are (cores, duration_s) pairs, sorted by cores, none dominated by another."""

    name: str
    kind: Kind
    modes: tuple[tuple[int, float], ...]
    # per mode (same order): (GLB bytes/s, HBM bytes/s) drawn at full speed; () = draws no shared bandwidth
    rates: tuple[tuple[float, float], ...] = ()

    def rate(self, cores: int) -> tuple[float, float]:
        """(GLB, HBM) bytes per second the op draws at full speed on ``cores`` cores ((0, 0) without rates)."""
        for (k, _), r in zip(self.modes, self.rates):
            if k == cores:
                return r
        return (0.0, 0.0)

    @property
    def min_duration_s(self) -> float:
        return min(d for _, d in self.modes)

    @property
    def min_work_s(self) -> float:
        """Least core-seconds the op can consume (cores x duration)."""
        return min(k * d for k, d in self.modes)


@dataclass(frozen=True)
class ScheduleProblem:
    ops: tuple[SchedOp, ...]
    edges: tuple[tuple[int, int], ...]
    num_tc: int
    num_vc: int
    glb_supply_Bps: float = 0.0  # shared by every op with rates (0: no bandwidth sharing modelled)
    hbm_supply_Bps: float = 0.0

    @property
    def shares_bandwidth(self) -> bool:
        """Whether some op draws shared GLB/HBM bandwidth (then ``solve`` re-times its schedule)."""
        return any(op.rates for op in self.ops)

    def relaxed(self) -> "ScheduleProblem":
        """The same ops and durations without rates: what the solvers optimize (every op at full bandwidth)."""
        if not self.shares_bandwidth and not self.glb_supply_Bps and not self.hbm_supply_Bps:
            return self
        from dataclasses import replace
        return replace(self, ops=tuple(replace(op, rates=()) for op in self.ops), glb_supply_Bps=0.0,
                       hbm_supply_Bps=0.0)

    def __post_init__(self) -> None:
        if self.num_tc <= 0 or self.num_vc <= 0:
            raise ConfigError(
                f"schedule problem: a chip needs at least one tensor and one vector core, got "
                f"num_tc={self.num_tc}, num_vc={self.num_vc}; fix the accelerator description")
        n = len(self.ops)
        for op in self.ops:
            if op.kind not in KINDS:
                raise ConfigError(f"op {op.name!r}: kind must be one of {KINDS}, got {op.kind!r}")
            if not op.modes:
                raise ConfigError(f"op {op.name!r}: needs at least one (cores, duration_s) mode")
            if op.rates and (len(op.rates) != len(op.modes) or any(
                    not (0.0 <= g < float("inf") and 0.0 <= h < float("inf")) for g, h in op.rates)):
                raise ConfigError(f"op {op.name!r}: rates must be one finite (GLB, HBM) pair >= 0 per mode")
            cap = self.capacity(op.kind)
            for k, d in op.modes:
                if not (1 <= k <= cap) or not (0.0 < d < float("inf")):
                    raise ConfigError(f"op {op.name!r}: invalid mode ({k}, {d}) for {cap} {op.kind} cores")
        for a, b in self.edges:
            if not (0 <= a < n and 0 <= b < n) or a == b:
                raise ConfigError(f"schedule problem: edge ({a}, {b}) is not between two distinct ops")
        topo_order(n, self.edges)  # raises on a cycle
        if self.shares_bandwidth and not (self.glb_supply_Bps > 0 and self.hbm_supply_Bps > 0):
            raise ConfigError("schedule problem: ops draw GLB/HBM bandwidth but the supply is not positive")

    def capacity(self, kind: str) -> int:
        return {"tc": self.num_tc, "vc": self.num_vc, "net": 1}[kind]

    def preds(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.ops]
        for a, b in self.edges:
            out[b].append(a)
        return out

    def succs(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.ops]
        for a, b in self.edges:
            out[a].append(b)
        return out


@dataclass(frozen=True)
class ScheduledOp:
    name: str
    kind: Kind
    start_s: float
    end_s: float
    cores: tuple[str, ...]  # e.g. ("tc0", "tc3"); collectives use ("net0",)


@dataclass(frozen=True)
class Schedule:
    """``ops`` are in the problem's op order. ``gap`` = (makespan - lower bound) / makespan.

    With shared bandwidth (``ScheduleProblem.shares_bandwidth``), ``status`` is the solvers' proof on the
    full-bandwidth durations, whose makespan is ``relaxed_makespan_s``; ``makespan_s`` is the re-timed
    schedule's (at least as long), and the optimum under shared bandwidth lies in [lower_bound_s,
    makespan_s]. ``relaxed_makespan_s`` is None where nothing is shared (it would equal ``makespan_s``)."""

    makespan_s: float
    lower_bound_s: float
    status: Status
    gap: float
    solve_time_s: float
    ops: tuple[ScheduledOp, ...]
    relaxed_makespan_s: float | None = None

    @property
    def proven_optimal(self) -> bool:
        """Proven optimal for the problem as posed: the solvers' proof, and with shared bandwidth also the
        re-timed makespan within 1e-9 of the lower bound (a stretched schedule is feasible, not proven best)."""
        if self.status != "optimal":
            return False
        return self.relaxed_makespan_s is None or self.makespan_s <= self.lower_bound_s * (1 + 1e-9)

    def to_dict(self) -> dict:
        out = {
            "makespan_s": self.makespan_s, "lower_bound_s": self.lower_bound_s, "status": self.status,
            "gap": self.gap, "solve_time_s": self.solve_time_s,
            "ops": [{"name": o.name, "kind": o.kind, "start_s": o.start_s, "end_s": o.end_s,
                     "cores": list(o.cores)} for o in self.ops],
        }
        if self.relaxed_makespan_s is not None:
            out["relaxed_makespan_s"] = self.relaxed_makespan_s
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Schedule":
        ops = tuple(ScheduledOp(o["name"], o["kind"], float(o["start_s"]), float(o["end_s"]),
                                tuple(o["cores"])) for o in d["ops"])
        relaxed = d.get("relaxed_makespan_s")
        return cls(float(d["makespan_s"]), float(d["lower_bound_s"]), d["status"], float(d["gap"]),
                   float(d["solve_time_s"]), ops, None if relaxed is None else float(relaxed))

    def core_utilization(self, kind: str, capacity: int) -> float:
        """Busy core-seconds of ``kind`` over capacity x makespan."""
        if self.makespan_s <= 0:
            return 0.0
        busy = sum((o.end_s - o.start_s) * len(o.cores) for o in self.ops if o.kind == kind)
        return busy / (capacity * self.makespan_s)


def topo_order(n: int, edges) -> list[int]:
    """Kahn's algorithm, smallest index first (deterministic); raises ConfigError on a cycle."""
    import heapq

    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    heap = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        i = heapq.heappop(heap)
        out.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, j)
    if len(out) != n:
        raise ConfigError("schedule problem: the op graph has a cycle; edges must form a DAG")
    return out


def prune_modes(modes) -> tuple[tuple[int, float], ...]:
    """Drop dominated modes: keep (k, d) only if every mode with fewer cores is strictly slower."""
    best: dict[int, float] = {}
    for k, d in modes:
        k, d = int(k), float(d)
        best[k] = min(d, best.get(k, float("inf")))
    out: list[tuple[int, float]] = []
    for k in sorted(best):
        if not out or best[k] < out[-1][1]:
            out.append((k, best[k]))
    return tuple(out)


def problem_key(problem: ScheduleProblem) -> str:
    """sha256 of what a schedule depends on: op kinds, modes (cores and exact durations), edges and core counts
    (and, with shared bandwidth, every mode's rates and the supply); not the op names."""
    canon = {
        "ops": [[op.kind, [[k, float(d).hex()] for k, d in op.modes]] for op in problem.ops],
        "edges": sorted([a, b] for a, b in problem.edges),
        "num_tc": problem.num_tc,
        "num_vc": problem.num_vc,
    }
    if problem.shares_bandwidth:  # what the re-timing under shared bandwidth reads (absent: keys as before)
        canon["rates"] = [[[float(g).hex(), float(h).hex()] for g, h in op.rates] for op in problem.ops]
        canon["supply"] = [float(problem.glb_supply_Bps).hex(), float(problem.hbm_supply_Bps).hex()]
    return hashlib.sha256(json.dumps(canon, separators=(",", ":")).encode()).hexdigest()
