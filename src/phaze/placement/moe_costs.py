"""An MoE model's per-layer costs for the pipeline: one "block" that stands for all of its blocks, and its
multi-token-prediction modules with the head.

The partition solvers place identical blocks. An MoE model mixes MoE blocks with a few dense ones (DeepSeek-V3's
first 3 of 61, the blocks off moe_layer_freq), so its block is their mean, weighted by their counts: the model's
total time, parameters and memory are exact, the few dense blocks' placement on particular stages is not modelled
(each stage carries its share of them). Multi-token prediction (DeepSeek-V3 sec. 2.2) runs, after the last block,
one more MoE block on a projection of [h; embedding] and the shared LM head: it is charged to the head layer
(Megatron places it with the loss on the last stage).
"""
from __future__ import annotations

from dataclasses import replace

from phaze.cost.moe import EpNetwork, MoeNetwork
from phaze.hardware.cluster import Cluster


def moe_network(cluster: Cluster, setting) -> MoeNetwork:
    """Where an MoE block's EP and ETP collectives run on ``cluster`` (Megatron-Core orders expert ranks ETP
    fastest, then EP: an EP group's members are etp devices apart)."""
    rt = setting.runtime
    ep = EpNetwork.of(cluster, setting.ep, setting.etp, rt.moe_dispatcher) if setting.ep > 1 else None
    etp = cluster.tier_for_group(setting.etp, 1, "tp") if setting.etp > 1 else None
    return MoeNetwork(ep, etp, rt.moe_a2a_overlap)


def moe_time_parts(model, setting, accelerator, tier, moe_net) -> dict:
    """The MoE block's all-to-all and routing-imbalance seconds per microbatch, forward + backward
    (``phaze.cost.moe.moe_time_parts_s``), as LayerCost fields."""
    from phaze.cost.gpu_layer import gpu_op_latencies_s
    from phaze.cost.moe import a2a_exposed_s, moe_time_parts_s
    from phaze.workload.graphs import layer_graph
    from phaze.workload.moe import busiest_rank_factor

    rt = setting.runtime
    load = busiest_rank_factor(model.num_experts, setting.ep, rt.moe_routing, rt.moe_capacity_factor)
    a2a = imbalance = 0.0
    for direction in ("fwd", "bwd"):
        g = layer_graph(model, setting, "block", direction)
        lat = gpu_op_latencies_s(g, accelerator, tier, moe_net)
        if moe_net is not None and moe_net.overlap:
            lat = a2a_exposed_s(g, lat)
        x, y = moe_time_parts_s(g, lat, load)
        a2a, imbalance = a2a + x, imbalance + y
    return {"moe_a2a_s": a2a, "moe_imbalance_s": imbalance}


def _blend(a, b, wa: float):
    """The per-block mean of ``wa`` blocks like ``a`` and 1 - wa like ``b``."""
    wb = 1.0 - wa
    mix = lambda f: wa * getattr(a, f) + wb * getattr(b, f)  # noqa: E731
    opt = mix("optimizer_bytes")
    zero1 = wa * a.zero1_optimizer_bytes + wb * b.zero1_optimizer_bytes
    return replace(a, fwd_s=mix("fwd_s"), bwd_s=mix("bwd_s"), params=round(mix("params")),
                   weight_bytes=mix("weight_bytes"), grad_bytes=mix("grad_bytes"), optimizer_bytes=opt,
                   activation_bytes=mix("activation_bytes"), working_bytes=max(a.working_bytes, b.working_bytes),
                   moe_a2a_s=mix("moe_a2a_s"), moe_imbalance_s=mix("moe_imbalance_s"), moe_host_s=mix("moe_host_s"),
                   zero1_scale=zero1 / opt if opt else 1.0)


def _with_mtp(head, block, n: int):
    """The head with ``n`` multi-token-prediction modules: each one MoE block, the head's work again (its norm,
    the shared LM head, the loss), and its projection (charged as the block's; 2 h^2 of 30 h^2-scale weights)."""
    return replace(head, fwd_s=head.fwd_s + n * (block.fwd_s + head.fwd_s),
                   moe_a2a_s=head.moe_a2a_s + n * block.moe_a2a_s,
                   moe_imbalance_s=head.moe_imbalance_s + n * block.moe_imbalance_s,
                   moe_host_s=head.moe_host_s + n * block.moe_host_s,
                   bwd_s=head.bwd_s + n * (block.bwd_s + head.bwd_s),
                   params=head.params + n * block.params, weight_bytes=head.weight_bytes + n * block.weight_bytes,
                   grad_bytes=head.grad_bytes + n * block.grad_bytes,
                   optimizer_bytes=head.optimizer_bytes + n * block.optimizer_bytes,
                   activation_bytes=head.activation_bytes + n * (block.activation_bytes + head.activation_bytes),
                   zero1_scale=((head.zero1_optimizer_bytes + n * block.zero1_optimizer_bytes)
                                / (head.optimizer_bytes + n * block.optimizer_bytes)
                                if head.optimizer_bytes + n * block.optimizer_bytes else 1.0))


def host_bound(block, model, setting):
    """The MoE ``block`` (a LayerCost, GPU-timed) as long as its host takes to issue it, if longer
    (``phaze.cost.moe_host``: Megatron-Core's eager launches, one device-to-host sync per MoE layer)."""
    from phaze.cost.moe_host import host_bound_block_s, moe_block_host_s

    fwd, bwd, stall = host_bound_block_s(block.fwd_s, block.bwd_s,
                                         moe_block_host_s(model.num_experts // setting.ep))
    return replace(block, fwd_s=fwd, bwd_s=bwd, moe_host_s=stall) if stall > 0 else block


def moe_layer_costs(model, setting, costs, times: dict, optimizer: str, accelerator, weight_grads: dict,
                    sequential: bool = False):
    """``costs`` (a ``LayerCosts``, the MoE block as "block") with the dense blocks blended in and the MTP modules
    on the head (``layer_costs`` calls this; the costs' own types are used, so this module imports none of it).
    ``sequential`` (a GPU running Megatron-Core): each MoE block takes at least its host time (``host_bound``)."""
    from phaze.cost.gpu_layer import grad_accumulate_s
    from phaze.workload.memory import layer_memory

    if sequential:
        costs = replace(costs, block=host_bound(costs.block, model, setting))
    block = costs.block
    n_moe = model.num_moe_layers
    if n_moe < model.num_layers:
        mem = layer_memory(model, setting, "dense_block", optimizer)
        dense = type(block)(
            fwd_s=float(times[("dense_block", "fwd")]), bwd_s=float(times[("dense_block", "bwd")]),
            params=int(mem.params), weight_bytes=float(mem.weight_bytes), grad_bytes=float(mem.grad_bytes),
            optimizer_bytes=float(mem.optimizer_bytes), activation_bytes=float(mem.activation_bytes),
            boundary_fwd_bytes=float(mem.boundary_fwd_bytes), boundary_bwd_bytes=float(mem.boundary_bwd_bytes),
            working_bytes=float(mem.recompute_working_bytes))
        dense = replace(dense, bwd_s=dense.bwd_s + grad_accumulate_s(
            dense.grad_bytes, accelerator, params=dense.params, fused=setting.grad_accum_fusion,
            deterministic=setting.deterministic, tensors=weight_grads["dense_block"]))
        block = _blend(block, dense, n_moe / model.num_layers)
    head = _with_mtp(costs.head, costs.block, model.mtp_layers) if model.mtp_layers else costs.head
    return replace(costs, block=block, head=head)
