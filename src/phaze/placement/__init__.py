"""Layers onto many chips: the training plan, its evaluation, the exact optimizer and baseline plans.

Public: ``Plan`` (its ``Recompute``), ``evaluate`` -> ``Evaluation``, ``optimize`` -> ``PlanResult(best, alternatives,
baselines)``, ``evaluate_baselines`` (the fixed comparison plans). Plain-number core for the co-search:
``LayerCost``/``LayerCosts``, ``evaluate_costs``, ``best_plan_from_costs``/``best_plans_from_costs``.
"""
from phaze.placement.baseline_plans import PAPER_PLANS, evaluate_baselines, megatron_baseline, paper_baseline
from phaze.placement.evaluation import DeviceSpec, evaluate, evaluate_costs
from phaze.placement.layer_costs import LayerCost, LayerCosts, compute_layer_costs, default_time_model
from phaze.placement.optimizer import Candidate, best_plan_from_costs, best_plans_from_costs, optimize
from phaze.placement.plan import BaselineResult, Evaluation, Plan, PlanResult, SearchStats, StageBreakdown
from phaze.placement.recompute import Recompute

__all__ = [
    "Plan", "Recompute", "Evaluation", "StageBreakdown", "PlanResult", "BaselineResult", "SearchStats", "evaluate",
    "optimize", "evaluate_baselines", "paper_baseline", "megatron_baseline", "PAPER_PLANS", "LayerCost", "LayerCosts",
    "compute_layer_costs", "default_time_model", "evaluate_costs", "DeviceSpec", "best_plan_from_costs",
    "best_plans_from_costs", "Candidate",
]
