"""A plan's launch settings for a training framework: Megatron-Core 0.15 command-line arguments, NeMo 2 recipe
attribute overrides, or a TorchTitan TOML file. Pure formatting: the plan is read duck-typed (its widths,
microbatching, stages, recompute modes and runtime fields), nothing is evaluated here.

What a framework cannot express is said twice: as a comment in the emitted text and in the ``warnings`` list.
The names come from the frameworks' sources (tests/fixtures/*.txt, written by scripts/launch_fixtures.py):
Megatron-LM ``megatron/training/arguments.py`` at core_v0.15.3, NeMo v2.4.0's ``MegatronStrategy`` /
``MegatronMixedPrecision`` / ``MockDataModule`` with Megatron-Core's config dataclasses, TorchTitan v0.2.2's
``torchtitan/config/job_config.py``.
"""
from __future__ import annotations

FRAMEWORKS = ("megatron", "nemo", "torchtitan")
_STRENGTH = {"none": 0, "selective": 1, "full": 2}



# Megatron-FSDP's --data-parallel-sharding-strategy for ZeRO-2 / -3 (Megatron-Core developer guide,
# megatron_fsdp.fully_shard.ShardingStrategy: optim_grads "similar to ZeRO-2", optim_grads_params ZeRO-3)
MEGATRON_FSDP_STRATEGY = {2: "optim_grads", 3: "optim_grads_params"}

def _blocks_per_virtual_stage(plan) -> list[int]:
    """Transformer blocks of each virtual stage in model order (the embedding and head are not blocks)."""
    last = plan.stages[-1][1]
    return [(b - a) - (a == 0) - (b == last) for a, b in plan.stages]


def _split(plan) -> tuple[str, object]:
    """How the stage split reads in Megatron-Core: ("even", None), ("first_last", (first, last)) (v = 1, the
    middle stages equal) or ("layout", layout string)."""
    blocks = _blocks_per_virtual_stage(plan)
    if len(set(blocks)) == 1 and blocks[0] > 0:
        return "even", None
    mid = blocks[1:-1]
    if plan.interleave == 1 and len(blocks) >= 2 and min(blocks) > 0 and len(set(mid)) <= 1:
        return "first_last", (blocks[0], blocks[-1])
    parts = [("E" if k == 0 else "") + "t" * n + ("L" if k == len(blocks) - 1 else "") for k, n in enumerate(blocks)]
    return "layout", "|".join(parts)


def _recompute(plan, warnings: list[str], framework: str) -> str:
    """The one recompute mode the framework runs on every stage: the plan's, or (per-stage modes, which no
    framework takes per pipeline stage) the strongest of them, with a warning."""
    modes = list(plan.recompute_modes)
    if len(set(modes)) == 1:
        return modes[0]
    strongest = max(modes, key=_STRENGTH.__getitem__)
    runs = "/".join(modes)
    how = {"megatron": "Megatron-Core recomputes the same layers on every pipeline stage (--recompute-method "
                       "uniform|block with one --recompute-num-layers)",
           "nemo": "Megatron-Core recomputes the same layers on every pipeline stage",
           "torchtitan": "TorchTitan's activation checkpointing has one mode for the whole model"}[framework]
    warnings.append(f"per-stage recompute modes {runs} cannot be expressed: {how}; emitted '{strongest}' on every "
                    f"stage (fits as planned or better, slower than planned)")
    return strongest


def megatron_args(plan, seq_len: int, moe: bool = False) -> dict:
    """Megatron-Core 0.15 ``pretrain_gpt.py`` arguments of ``plan`` (the model's own shape flags such as
    --num-layers are not the plan's and are left to the user): {"args": argv tokens, "warnings": [...],
    "comments": [...]}."""
    w, c, a = [], [], []
    blocks = _blocks_per_virtual_stage(plan)
    a += ["--tensor-model-parallel-size", str(plan.tp), "--pipeline-model-parallel-size", str(plan.pp)]
    kind, val = _split(plan)
    if kind == "even" and plan.interleave > 1:
        a += ["--num-layers-per-virtual-pipeline-stage", str(blocks[0])]
    elif kind == "first_last":
        a += ["--decoder-first-pipeline-num-layers", str(val[0]), "--decoder-last-pipeline-num-layers", str(val[1])]
    elif kind == "layout":
        a += ["--pipeline-model-parallel-layout", val]
        c.append("stage split as a layout: one '|'-separated entry per virtual stage in model order, "
                 "E = embedding, t = transformer block, L = output layer and loss")
    if plan.cp > 1:
        a += ["--context-parallel-size", str(plan.cp)]
    if moe:
        a += ["--expert-model-parallel-size", str(plan.ep), "--expert-tensor-parallel-size", str(plan.etp)]
    gb = plan.microbatch_size * plan.num_microbatches * plan.dp
    a += ["--micro-batch-size", str(plan.microbatch_size), "--global-batch-size", str(gb), "--seq-length", str(seq_len)]
    if plan.sequence_parallel and plan.tp > 1:
        a.append("--sequence-parallel")
    if plan.zero == 1:
        a.append("--use-distributed-optimizer")
    elif plan.zero >= 2:
        a += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", MEGATRON_FSDP_STRATEGY[plan.zero]]
        if plan.pp > 1:
            w.append("Megatron-FSDP (ZeRO-2/3) with pipeline parallelism: phaze has not checked that Megatron-Core "
                     "0.15 runs the two together")
    if plan.dp_overlap:
        a.append("--overlap-grad-reduce")
        if plan.zero1:
            a.append("--overlap-param-gather")
    if plan.tp_overlap and plan.tp > 1:
        a.append("--tp-comm-overlap")
        c.append(f"TP overlap as userbuffers configuration '{plan.tp_overlap_config}': give its settings as a YAML "
                 f"file with --tp-comm-overlap-cfg")
    mode = _recompute(plan, w, "megatron")
    if mode == "full":
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif mode == "selective":
        a += ["--recompute-granularity", "selective", "--recompute-modules", *plan.runtime.recompute_modules]
    if plan.precision == "fp16":
        a.append("--fp16")
    else:
        a.append("--bf16")
    if plan.precision == "fp8":
        a += ["--fp8-format", "hybrid", "--fp8-recipe", "delayed"]
        c.append("FP8: phaze's FP8 time is checked against Transformer Engine's delayed and current scaling "
                 "('--fp8-recipe tensorwise' for current scaling)")
    a += ["--attention-backend", "flash" if plan.attention == "flash" else "unfused"]
    if plan.grad_dtype == "bf16":
        a.append("--grad-reduce-in-bf16")
    if plan.optimizer_state != "fp32":
        w.append(f"optimizer state '{plan.optimizer_state}' is Apex's DistributedFusedAdam layout (NeMo 1.x), which "
                 f"Megatron-Core's optimizer does not hold; emitted Megatron's fp32 Adam state (more memory than "
                 f"planned)")
    if plan.deterministic:
        a.append("--deterministic-mode")
    if not plan.grad_accum_fusion:
        a.append("--no-gradient-accumulation-fusion")
    if moe:
        disp = plan.runtime.moe_dispatcher
        a += ["--moe-token-dispatcher-type", "flex" if disp == "deepep" else disp]
        if disp == "deepep":
            a.append("--moe-enable-deepep")
        routing = plan.runtime.moe_routing
        if routing == "balanced":
            a.append("--moe-router-force-load-balancing")
        elif routing.startswith("capacity:"):
            a += ["--moe-expert-capacity-factor", routing.partition(":")[2]]
        if plan.runtime.moe_a2a_overlap:
            a.append("--overlap-moe-expert-parallel-comm")
    c.append(f"world size {plan.devices} GPUs (tp x pp x cp x dp = {plan.tp} x {plan.pp} x {plan.cp} x {plan.dp})")
    return {"args": a, "warnings": w, "comments": c}


def nemo_overrides(plan, seq_len: int, moe: bool = False) -> dict:
    """NeMo 2 recipe attribute overrides of ``plan`` (``recipe = llm.<model>.pretrain_recipe(...)`` first), every
    setting given explicitly since recipes carry their own: {"args": Python assignment lines, ...}."""
    w, c, lines = [], [], []

    def put(path: str, value) -> None:
        lines.append(f"recipe.{path} = {value!r}" if not isinstance(value, _Raw) else f"recipe.{path} = {value}")

    s = "trainer.strategy."
    put(s + "tensor_model_parallel_size", plan.tp)
    put(s + "pipeline_model_parallel_size", plan.pp)
    put(s + "virtual_pipeline_model_parallel_size", plan.interleave if plan.interleave > 1 else None)
    kind, val = _split(plan)
    put(s + "num_layers_in_first_pipeline_stage", val[0] if kind == "first_last" else None)
    put(s + "num_layers_in_last_pipeline_stage", val[1] if kind == "first_last" else None)
    put(s + "pipeline_model_parallel_layout", val if kind == "layout" else None)
    put(s + "context_parallel_size", plan.cp)
    put(s + "sequence_parallel", bool(plan.sequence_parallel and plan.tp > 1))
    if moe:
        put(s + "expert_model_parallel_size", plan.ep)
        put(s + "expert_tensor_parallel_size", plan.etp)
    put("data.micro_batch_size", plan.microbatch_size)
    put("data.global_batch_size", plan.microbatch_size * plan.num_microbatches * plan.dp)
    put("data.seq_length", seq_len)
    put("optim.config.use_distributed_optimizer", bool(plan.zero1))
    put(s + "ddp.use_distributed_optimizer", bool(plan.zero1))
    if plan.zero >= 2:
        put(s + "ddp.use_megatron_fsdp", True)
        put(s + "ddp.data_parallel_sharding_strategy", MEGATRON_FSDP_STRATEGY[plan.zero])
    put(s + "ddp.overlap_grad_reduce", bool(plan.dp_overlap))
    put(s + "ddp.overlap_param_gather", bool(plan.dp_overlap and plan.zero1))
    put(s + "ddp.grad_reduce_in_fp32", plan.grad_dtype != "bf16")
    put("trainer.plugins.grad_reduce_in_fp32", plan.grad_dtype != "bf16")
    mode = _recompute(plan, w, "nemo")
    put("model.config.recompute_granularity", None if mode == "none" else mode)
    put("model.config.recompute_method", "uniform" if mode == "full" else None)
    put("model.config.recompute_num_layers", 1 if mode == "full" else None)
    if mode == "selective":
        put("model.config.recompute_modules", list(plan.runtime.recompute_modules))
    put("trainer.plugins.precision", "16-mixed" if plan.precision == "fp16" else "bf16-mixed")
    if plan.precision == "fp8":
        put("trainer.plugins.fp8", "hybrid")
        put("trainer.plugins.fp8_recipe", "delayed")
    if plan.precision == "fp16":
        c.append("fp16: start from the recipe's fp16_mixed() plugin (it also sets params and pipeline dtypes)")
    put("model.config.attention_backend",
        _Raw("AttnBackend.flash" if plan.attention == "flash" else "AttnBackend.unfused"))
    c.append("AttnBackend: from megatron.core.transformer.enums import AttnBackend")
    tp_ov = bool(plan.tp_overlap and plan.tp > 1)
    put("model.config.tp_comm_overlap", tp_ov)
    if tp_ov:
        c.append(f"TP overlap: add MegatronCommOverlapCallback(tp_comm_overlap=True) to recipe.trainer.callbacks, "
                 f"with the userbuffers configuration '{plan.tp_overlap_config}'")
    put("model.config.deterministic_mode", bool(plan.deterministic))
    put("model.config.gradient_accumulation_fusion", bool(plan.grad_accum_fusion))
    if plan.optimizer_state != "fp32":
        w.append(f"optimizer state '{plan.optimizer_state}' is Apex's DistributedFusedAdam layout (NeMo 1.x); NeMo "
                 f"2 runs Megatron-Core's optimizer: emitted its fp32 Adam state (more memory than planned)")
    if moe:
        disp = plan.runtime.moe_dispatcher
        put("model.config.moe_token_dispatcher_type", "flex" if disp == "deepep" else disp)
        if disp == "deepep":
            put("model.config.moe_enable_deepep", True)
        routing = plan.runtime.moe_routing
        put("model.config.moe_router_force_load_balancing", routing == "balanced")
        put("model.config.moe_expert_capacity_factor",
            float(routing.partition(":")[2]) if routing.startswith("capacity:") else None)
        put("model.config.overlap_moe_expert_parallel_comm", bool(plan.runtime.moe_a2a_overlap))
    c.append(f"devices: trainer.num_nodes x trainer.devices = {plan.devices} GPUs")
    return {"args": lines, "warnings": w, "comments": c}


class _Raw(str):
    """A Python expression emitted as is (not a literal)."""


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "[" + ", ".join(_toml_value(x) for x in v) + "]"


def _fqns(plan) -> list[list[str]]:
    """TorchTitan module names of each virtual stage (its Llama / Qwen / DeepSeek models: tok_embeddings,
    layers.N, norm, output)."""
    last = plan.stages[-1][1]
    out = []
    for a, b in plan.stages:
        names = []
        for layer in range(a, b):
            if layer == 0:
                names.append("tok_embeddings")
            elif layer == last - 1:
                names += ["norm", "output"]
            else:
                names.append(f"layers.{layer - 1}")
        out.append(names)
    return out


def torchtitan_toml(plan, seq_len: int, moe: bool = False) -> dict:
    """TorchTitan (v0.2.2 job config) TOML tables of ``plan``: {"toml": text, "warnings": [...], ...}."""
    w, c = [], []
    tables: dict[str, dict] = {"parallelism": {}, "training": {}, "activation_checkpoint": {}}
    par, tr = tables["parallelism"], tables["training"]
    par["data_parallel_replicate_degree"] = 1
    par["data_parallel_shard_degree"] = plan.dp
    if plan.dp > 1 and plan.zero == 3:
        par["fsdp_reshard_after_forward"] = "always"
    elif plan.dp > 1 and plan.zero == 2:
        par["fsdp_reshard_after_forward"] = "never"
        w.append("ZeRO-2 as TorchTitan's FSDP2 without resharding after forward: the weights are still sharded "
                 "between steps and gathered once per microbatch (less memory, more communication than planned)")
    elif plan.dp > 1:
        w.append("TorchTitan's data parallelism with TP/PP is FSDP2 (weights, gradients and optimizer state "
                 "sharded, like ZeRO-3, its all-gathers per layer); the plan is "
                 + ("ZeRO-1 (optimizer state sharded)" if plan.zero1 else "plain data parallelism")
                 + ": less memory than planned, more communication (plan with --zero 3 for the plan TorchTitan runs)")
    par["tensor_parallel_degree"] = plan.tp
    if plan.tp > 1 and not plan.sequence_parallel:
        w.append("TorchTitan's tensor parallelism always shards the norms over the sequence (sequence "
                 "parallelism); the plan has none")
    if plan.tp_overlap and plan.tp > 1:
        par["enable_async_tensor_parallel"] = True
        tables["compile"] = {"enable": True}
        c.append("async TP needs torch.compile ([compile] enable = true)")
    par["pipeline_parallel_degree"] = plan.pp
    if plan.pp > 1:
        par["pipeline_parallel_schedule"] = "Interleaved1F1B" if plan.interleave > 1 else "1F1B"
        par["pipeline_parallel_microbatch_size"] = plan.microbatch_size
        par["module_fqns_per_model_part"] = _fqns(plan)
        c.append("module_fqns_per_model_part: the stage split, one list per virtual stage (TorchTitan's module "
                 "names of its Llama-style models)")
    par["context_parallel_degree"] = plan.cp
    if moe:
        par["expert_parallel_degree"] = plan.ep
        par["expert_tensor_parallel_degree"] = plan.etp
        disp = plan.runtime.moe_dispatcher
        if disp == "deepep":
            par["expert_parallel_comm_backend"] = "deepep"
        elif disp == "allgather":
            w.append("TorchTitan dispatches tokens all-to-all; the plan's all-gather dispatcher has no setting")
        routing = plan.runtime.moe_routing
        if routing == "balanced":
            tables["debug"] = {"moe_force_load_balance": True}
        elif routing.startswith("capacity:"):
            w.append(f"TorchTitan's MoE is dropless; the plan's {routing} routing has no setting")
        if plan.runtime.moe_a2a_overlap:
            w.append("the plan overlaps the MoE all-to-alls with the other microbatch's compute (Megatron-Core's "
                     "1F1B A2A overlap); TorchTitan has no such setting")
    if plan.pp > 1:
        tr["local_batch_size"] = plan.microbatch_size * plan.num_microbatches
    else:
        tr["local_batch_size"] = plan.microbatch_size  # gradient accumulation over num_microbatches steps
    tr["global_batch_size"] = plan.microbatch_size * plan.num_microbatches * plan.dp
    tr["seq_len"] = seq_len
    if plan.precision == "fp16":
        w.append("TorchTitan's mixed precision takes bfloat16 or float32 parameters, not fp16; emitted bfloat16")
    tr["mixed_precision_param"] = "bfloat16"
    if plan.precision == "fp8":
        tables["model"] = {"converters": ["quantize.linear.float8"]}
        tables["quantize.linear.float8"] = {"recipe_name": "tensorwise"}
        w.append("FP8 in TorchTitan is torchao's float8 training (tensorwise current scaling), not Transformer "
                 "Engine's, which phaze's FP8 time is measured from")
    if plan.grad_dtype == "bf16":
        w.append("TorchTitan reduces gradients in float32 only (mixed_precision_reduce); the plan reduces bf16")
    if plan.optimizer_state != "fp32":
        w.append(f"optimizer state '{plan.optimizer_state}' has no TorchTitan setting (fp32 Adam state)")
    if not plan.dp_overlap and plan.dp > 1:
        c.append("FSDP2 overlaps its collectives with compute (prefetch); the plan does not overlap the DP sync")
    if plan.attention != "flash":
        w.append("TorchTitan runs fused attention (SDPA / FlexAttention); the plan's standard attention has no "
                 "setting")
    mode = _recompute(plan, w, "torchtitan")
    tables["activation_checkpoint"]["mode"] = mode
    if mode == "selective":
        tables["activation_checkpoint"]["selective_ac_option"] = "op"
        w.append("TorchTitan's selective checkpointing ('op') saves its own set of ops, not Megatron's "
                 f"recompute modules {', '.join(plan.runtime.recompute_modules)}")
    if plan.deterministic:
        tables.setdefault("debug", {})["deterministic"] = True
    if not plan.grad_accum_fusion:
        w.append("gradient-accumulation fusion is Megatron-Core's; TorchTitan has no setting")
    lines = [f"# phaze plan: {plan.devices} GPUs (tp x pp x cp x dp = {plan.tp} x {plan.pp} x {plan.cp} x {plan.dp})"]
    lines += [f"# {x}" for x in c] + [f"# WARNING: {x}" for x in w]
    for name, kv in tables.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in kv.items()]
    return {"toml": "\n".join(lines) + "\n", "warnings": w, "comments": c}


def launch_settings(plan, framework: str, seq_len: int, moe: bool = False) -> dict:
    """The launch settings of ``plan`` for ``framework`` (``FRAMEWORKS``): {"args": [...]} (megatron: argv tokens;
    nemo: recipe assignment lines) or {"toml": text} (torchtitan), with "warnings" (what the framework cannot
    express) and "comments"."""
    fn = {"megatron": megatron_args, "nemo": nemo_overrides, "torchtitan": torchtitan_toml}.get(framework)
    if fn is None:
        raise ValueError(f"unknown framework {framework!r}; use one of {', '.join(FRAMEWORKS)}")
    return fn(plan, seq_len, moe)


def launch_text(settings: dict, framework: str) -> str:
    """The settings as text to paste: warnings and comments as comments, then the arguments / lines / TOML."""
    if "toml" in settings:
        return settings["toml"]
    head = [f"# WARNING: {x}" for x in settings["warnings"]] + [f"# {x}" for x in settings["comments"]]
    if framework == "megatron":
        args, body, i = settings["args"], [], 0
        while i < len(args):  # one flag a line, with its values
            j = i + 1
            while j < len(args) and not args[j].startswith("--"):
                j += 1
            body.append(" ".join(_shell(x) for x in args[i:j]))
            i = j
        return "\n".join(head + [" \\\n".join(body)]) + "\n"
    return "\n".join(head + list(settings["args"])) + "\n"


def _shell(tok: str) -> str:
    import shlex
    return shlex.quote(tok)
