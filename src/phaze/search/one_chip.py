"""The Spotlight-style objective: forward + backward latency of every layer of one model on ONE chip at a
fixed microbatch, with no placement, memory-capacity or network terms (Spotlight, HPCA 2023, optimises one
accelerator for the sum of its layer delays).

The setting is tensor-parallel width 1 (one chip holds whole layers, so no collective), no recompute and
no sequence parallelism. The latency is embedding + num_layers x block + head, each forward plus backward,
with each layer's optimal operator schedule (``phaze.schedule``, the same per-layer schedules the
co-search uses). Slots whose vectorized lower and upper bounds agree need no solver call.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phaze.hardware.accelerator import Accelerator, ArchArrays
from phaze.schedule import ScheduleCache, build_problem, layer_time_bounds, solve_cached
from phaze.search.bounds import SLOTS
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import TrainSetting
from phaze.workload.graphs import layer_graph
from phaze.workload.traced import microbatch_choices

TIGHT_RTOL = 1e-9  # lower and upper bound this close (relative): the bound is the optimum, no solve


def one_chip_setting(model: ModelConfig, microbatch_size: int = 1) -> TrainSetting:
    """t = 1, no recompute, no sequence parallelism, the model's sequence length (a traced model: its own
    microbatch, which must equal ``microbatch_size``)."""
    (mbs,) = microbatch_choices(model, (microbatch_size,))
    setting = TrainSetting(microbatch_size=mbs, seq_len=model.seq_len, tp=1, recompute="none")
    setting.check_model(model)
    return setting


def layer_counts(model: ModelConfig) -> np.ndarray:
    """How many times each slot of SLOTS occurs in one pass over the model: [embedding fwd, bwd, block fwd,
    bwd, head fwd, bwd]."""
    seq = model.layer_sequence()
    return np.array([seq.count(kind) for kind, _ in SLOTS], dtype=float)


def latency_bounds(model: ModelConfig, setting: TrainSetting, arch: ArchArrays) -> tuple[np.ndarray, np.ndarray]:
    """[slot, chip] lower and upper bounds of each layer slot's optimal makespan for many chips at once."""
    lower, upper = np.zeros((len(SLOTS), len(arch))), np.zeros((len(SLOTS), len(arch)))
    for j, (kind, direction) in enumerate(SLOTS):
        lower[j], upper[j] = layer_time_bounds(layer_graph(model, setting, kind, direction), arch, None)
    return lower, upper


def energy_j(model: ModelConfig, setting: TrainSetting, arch: ArchArrays) -> np.ndarray:
    """[chip] energy of one forward + backward pass over every layer (``phaze.cost.energy``: every op on all
    cores of its kind; energy does not depend on the schedule). NaN where the chip model has no energy
    (chips of the paper's template)."""
    from phaze.cost.energy import graph_energy_j

    counts = layer_counts(model)
    total = np.zeros(len(arch))
    for j, (kind, direction) in enumerate(SLOTS):
        total = total + counts[j] * graph_energy_j(layer_graph(model, setting, kind, direction), arch)
    return total


@dataclass(frozen=True)
class OneChipLatency:
    """The objective of one chip: ``latency_s`` = sum over slots of count x optimal makespan; ``energy_j``
    of the same pass (None when not asked for)."""

    latency_s: float
    slot_s: tuple[float, ...]  # optimal makespan per slot (order: SLOTS)
    schedules_solved: int  # slots that needed the per-layer solver (the others: bounds agreed)
    schedules_not_optimal: int  # of those, how many the solver did not prove optimal
    energy_j: float | None = None

    @property
    def edp_js(self) -> float | None:
        """Energy-delay product (J s) of one pass over every layer."""
        return None if self.energy_j is None else self.energy_j * self.latency_s


def one_chip_latency(model: ModelConfig, accelerator: Accelerator, microbatch_size: int = 1, *,
                     cache: ScheduleCache | None = None, time_limit_s: float = 1.0,
                     bounds: tuple[np.ndarray, np.ndarray] | None = None,
                     with_energy: bool = False) -> OneChipLatency:
    """Forward + backward latency of every layer of ``model`` on ``accelerator`` (see the module doc).
    ``bounds``: this chip's [slot] lower and upper bounds if already known (vectorized elsewhere);
    ``with_energy``: also the pass's energy (for the energy-delay product)."""
    setting = one_chip_setting(model, microbatch_size)
    if bounds is None:
        lo, up = latency_bounds(model, setting, accelerator.as_arrays())
        bounds = (lo[:, 0], up[:, 0])
    lower, upper = bounds
    slot_s, solved, not_optimal = [], 0, 0
    for j, (kind, direction) in enumerate(SLOTS):
        if upper[j] <= lower[j] * (1 + TIGHT_RTOL):
            slot_s.append(float(upper[j]))
            continue
        problem = build_problem(layer_graph(model, setting, kind, direction), accelerator, None)
        sched = solve_cached(problem, cache, time_limit_s)
        solved += 1
        not_optimal += not sched.proven_optimal
        slot_s.append(float(sched.makespan_s))
    total = float(np.dot(layer_counts(model), slot_s))
    energy = float(energy_j(model, setting, accelerator.as_arrays())[0]) if with_energy else None
    return OneChipLatency(total, tuple(slot_s), solved, not_optimal, energy)
