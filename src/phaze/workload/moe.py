"""How routed tokens load an MoE block's expert-parallel ranks: the busiest rank's share of the assignments.

Every EP rank waits for the others at the combine all-to-all, so a block takes as long as its busiest rank. With
dropless routing (every token goes to its top-k experts) the ranks' loads differ; this module gives the busiest
rank's load relative to the mean (>= 1), which ``phaze.workload.graphs.moe_tokens`` multiplies into the tokens
that rank dispatches, computes and keeps.

The model, one parameter: the experts' popularity varies across experts with coefficient of variation
``EXPERT_POPULARITY_CV`` (router skew; auxiliary-loss-balanced routers still show it). A rank holding E/ep of the
E experts carries the sum of their loads, whose relative spread is cv x sqrt(ep / E) (a sum of E/ep independent
shares), and the expected largest of ep such loads lies about sqrt(2 ln ep) standard deviations above the mean
(the maximum of ep Gaussians, e.g. Cramer, Mathematical Methods of Statistics, 1946, sec. 28.6). Forced-balance
routing (Megatron-Core ``moe_router_force_load_balancing``, the published benchmarks' setting) has no spread; a
capacity factor F caps every expert at F x its mean share (the overflow is dropped).
"""
from __future__ import annotations

import math

# Coefficient of variation of the experts' popularity under dropless routing with an auxiliary balancing loss.
# Fitted on the one dropless run of the MoE dev set (Megatron-Core v0.9 Mixtral 8x7B on 64 H100,
# phaze/validation/data/moe_runs.json) and nothing else: its error crosses zero at cv = 0.0153 (-2.1% at 0,
# +12.8% at 0.10); rounded to 0.015 (-1.0%). At EP 8 over 8 experts that charges the busiest rank 3% more
# tokens. One run cannot separate this from the rest of the model's error: docs/validation.md, "MoE".
EXPERT_POPULARITY_CV = 0.015


def busiest_rank_factor(num_experts: int, ep: int, routing: str, capacity_factor: float | None) -> float:
    """The busiest EP rank's assignments over the mean rank's: 1 for balanced routing, and for dropless routing
    at ep = 1 (every expert on one rank); a capacity factor F caps it at F (below 1: tokens dropped)."""
    if routing == "balanced":
        return 1.0
    dropless = 1.0
    if ep > 1:
        dropless += EXPERT_POPULARITY_CV * math.sqrt(ep / num_experts) * math.sqrt(2.0 * math.log(ep))
    if capacity_factor is not None:  # a cap below the mean drops tokens even on one rank
        return min(dropless, capacity_factor)
    return dropless
