"""What the HTML report reads off a plan's evaluation (``Evaluation.to_dict()``): where one iteration's time goes.
The plan details themselves (evaluation, block Gantt data) are computed by ``phaze.placement.detail`` and
``phaze.search.details`` and come in with the result a report formats."""
from __future__ import annotations


def iteration_parts(ev: dict) -> list[tuple[str, float]]:
    """Where one iteration's time goes, summing to ``iteration_time_s``: the bottleneck stage's forward,
    backward and sends over all microbatches (the steady state), the pipeline bubble, then the exposed
    data-parallel gradient sync and the optimizer step of the slowest-finishing stage. An MoE model's exposed
    all-to-all, routing imbalance and host-bound stall (``phaze.cost.moe_host``) are shown apart, taken out of
    its forward and backward in proportion."""
    b = ev["stage_breakdown"][ev["bottleneck_stage"]]
    m = ev["num_microbatches"]
    steady = ev["steady_s"]
    per_mb = b["fwd_s"] + b["bwd_s"] + b["p2p_s"]
    scale = steady / (m * per_mb) if per_mb > 0 else 0.0  # 1 unless interleaving splits the stage
    a2a, imb, host = b.get("moe_a2a_s", 0.0), b.get("moe_imbalance_s", 0.0), b.get("moe_host_s", 0.0)
    apart = a2a + imb + host
    keep = 1.0 - apart / (b["fwd_s"] + b["bwd_s"]) if apart > 0 else 1.0  # MoE parts shown apart
    moe = [("MoE all-to-all, exposed (bottleneck stage)", m * a2a * scale),
           ("MoE routing imbalance (bottleneck stage)", m * imb * scale)] if a2a + imb > 0 else []
    if host > 0:
        moe.append(("MoE host-bound stall (bottleneck stage)", m * host * scale))
    return [("forward (bottleneck stage)", m * b["fwd_s"] * keep * scale),
            ("backward incl. recompute (bottleneck stage)", m * b["bwd_s"] * keep * scale), *moe,
            ("pipeline sends (bottleneck stage)", m * b["p2p_s"] * scale),
            ("pipeline bubble", ev["bubble_s"]),
            ("data-parallel gradient sync (exposed)", ev["dp_allreduce_s"]),
            ("optimizer step", ev["optimizer_step_s"])]
