"""Per-layer operator scheduling on tensor cores, vector cores and the network port of one chip.

Semantics in ``phaze.schedule.problem``; ``solve`` runs bounds and list scheduling, then where they differ
an exact branch and bound (``bnb``) and CP-SAT (``cpsat``) only for what that leaves unproven;
``validate`` checks any schedule; ``layer_time_bounds`` bounds the optimum for many chips.
"""
from phaze.schedule.bounds import critical_path_s, lower_bound_s, work_bound_s
from phaze.schedule.build import build_problem
from phaze.schedule.cache import ScheduleCache, problem_key, solve_cached
from phaze.schedule.problem import (MIN_DURATION_S, Schedule, ScheduledOp, ScheduleProblem, SchedOp,
                                    prune_modes)
from phaze.schedule.solver import solve
from phaze.schedule.validate import ScheduleViolation, validate
from phaze.schedule.vector_bounds import layer_time_bounds

__all__ = [
    "SchedOp", "ScheduleProblem", "ScheduledOp", "Schedule", "MIN_DURATION_S", "prune_modes",
    "build_problem", "solve", "validate", "ScheduleViolation", "ScheduleCache", "solve_cached",
    "problem_key", "layer_time_bounds", "lower_bound_s", "critical_path_s", "work_bound_s",
]
