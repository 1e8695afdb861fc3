"""The `phaze` command: parse arguments, call the public API, print a table or JSON. Nothing else."""
from __future__ import annotations

import argparse
import sys

from phaze.errors import PhazeError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (with a pointer to --help) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_list(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _str_list(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _setting_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mbs", type=int, default=1, help="microbatch size in sequences (default: 1)")
    p.add_argument("--seq", type=int, default=None, help="sequence length (default: the model's)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel width (default: 1)")
    p.add_argument("--sequence-parallel", action="store_true", help="Megatron sequence parallelism (default: off)")
    p.add_argument("--recompute", choices=("none", "selective", "full"), default="none",
                   help="activation recomputation (default: none)")


def _plan_common(p: argparse.ArgumentParser) -> None:
    from phaze.api import GRAD_DTYPES, MOE_DISPATCHERS, OPTIMIZER_STATES, Runtime
    rt = Runtime()  # the flags' defaults are the Runtime's (one set of defaults)
    DEFAULT_GRAD_DTYPE, DEFAULT_OPTIMIZER_STATE, DEFAULT_TP_OVERLAP_CONFIG = (rt.grad_dtype, rt.optimizer_state,
                                                                              rt.tp_overlap_config)
    p.add_argument("--model", required=True, help="zoo name (see `phaze models`), a YAML/JSON model file, hf:CONFIG.json, a "
                                                    "traced FILE.json or torch:MODULE:FACTORY (required)")
    p.add_argument("--accelerator", required=True,
                   help="tpuv4-like | tpuv4 | tpuv4-like-paper | a100-80g | h100-80g or a YAML/JSON chip file (required)")
    p.add_argument("--devices", type=int, required=True, help="devices available (required)")
    p.add_argument("--global-batch", type=int, required=True, help="sequences per iteration (required)")
    p.add_argument("--cluster", default=None, help="dgx-a100 | dgx-h100 | flat-4gib, optionally NAME:N, or a YAML/JSON "
                                                   "cluster file (docs/cluster-file.md) (default: dgx-a100 for "
                                                   "a100-80g, dgx-h100 for h100-80g, a chip file's own network "
                                                   "when it has one, else flat-4gib)")
    p.add_argument("--seq", type=int, default=None, help="sequence length (default: the model's)")
    p.add_argument("--attention", choices=("standard", "flash"), default=rt.attention,
                   help="attention kernel: flash never stores the score matrix and has its own time model; "
                        f"standard materialises it (default: {rt.attention})")
    p.add_argument("--precision", choices=("fp16", "bf16", "fp8"), default=rt.precision,
                   help="GEMM number format; fp8 runs the blocks' linear layers on FP8 tensor cores "
                        f"(Transformer Engine; H100) (default: {rt.precision})")
    p.add_argument("--tp-overlap", action=argparse.BooleanOptionalAction, default=None,
                   help="overlap tensor-parallel all-gathers / reduce-scatters with the GEMMs they feed "
                        "(Transformer Engine userbuffers; plans with sequence parallelism); --no-tp-overlap turns it "
                        "off (default: on, as current Megatron-Core / NeMo recipes; off with --deterministic)")
    p.add_argument("--tp-overlap-config", default=DEFAULT_TP_OVERLAP_CONFIG, metavar="NAME",
                   help="the userbuffers configuration of --tp-overlap: which TE method and how many SMs each "
                        "overlap uses, as the framework was set up (not searched); te-default for runs that name "
                        "none; names and sources in phaze/cost/data/tp_overlap_configs.json "
                        f"(default: {DEFAULT_TP_OVERLAP_CONFIG})")
    p.add_argument("--grad-dtype", choices=GRAD_DTYPES, default=DEFAULT_GRAD_DTYPE,
                   help="number format of the gradient buffer, its data-parallel reduce and the wgrad accumulation "
                        "(Adam's state: --optimizer-state): fp32 as Megatron-LM's main grads, bf16 as NeMo's "
                        "grad_sync_dtype: bf16 (half the gradient bytes); a numerics choice, not searched by plan "
                        f"(default: {DEFAULT_GRAD_DTYPE})")
    p.add_argument("--optimizer-state", choices=OPTIMIZER_STATES, default=DEFAULT_OPTIMIZER_STATE,
                   help="what Adam keeps per parameter: fp32 master + m + v (12 B, Megatron), fp32-remainders "
                        "(10 B, Apex store_param_remainders: NeMo 1.x with a bf16 model), bf16-master (6 B) or bf16 "
                        "(4 B, NeMo optim.dtype: bf16 with / without FP8 parameters); a numerics choice, not "
                        f"searched by plan (default: {DEFAULT_OPTIMIZER_STATE})")
    p.add_argument("--deterministic", action="store_true",
                   help="PyTorch's deterministic mode as Megatron-LM's --deterministic-mode runs it: every "
                        "allocation is filled before use, and on an A100 FlashAttention-2's deterministic "
                        "backward (cuDNN's on an H100 is not costed); GPUs only, no --tp-overlap; not searched by "
                        "plan (default: off)")
    p.add_argument("--no-grad-accum-fusion", action="store_true",
                   help="as Megatron-LM's --no-gradient-accumulation-fusion: each wgrad GEMM writes a fresh "
                        "16-bit gradient that is then added into the gradient buffer, instead of accumulating "
                        "into it in the GEMM; not searched by plan (default: off, the GEMMs accumulate)")
    p.add_argument("--dp-overlap", action=argparse.BooleanOptionalAction, default=None,
                   help="overlap the data-parallel gradient reduce with the backward pass, bucketed, and with "
                        "ZeRO-1/2 the parameter all-gather with the next forward, ZeRO-3 the gathers with the compute "
                        "before them; --no-dp-overlap turns it off (default: on, as current Megatron-Core / NeMo "
                        "recipes)")
    p.add_argument("--memory-reserve-gib", type=float, default=None,
                   help="GiB per device no plan may use (CUDA context, NCCL buffers, allocator "
                        f"fragmentation) (default: {rt.memory_reserve_bytes / 2**30:g})")
    p.add_argument("--moe-dispatcher", choices=MOE_DISPATCHERS, default=rt.moe_dispatcher,
                   help="MoE models: how tokens reach their experts (Megatron-Core --moe-token-dispatcher-type): "
                        "an all-to-all over the expert-parallel group, an all-gather of every token, or DeepEP's "
                        f"fused kernels; not searched by plan (default: {rt.moe_dispatcher})")
    p.add_argument("--moe-routing", default=rt.moe_routing, metavar="{balanced,dropless,capacity:F}",
                   help="MoE models: balanced (every expert its mean share, Megatron-Core's forced balancing), "
                        "dropless (every token to its top-k experts, the busiest expert-parallel rank setting the "
                        "pace) or capacity:F (each expert takes at most F > 0 times its mean share, the rest "
                        f"dropped); not searched by plan (default: {rt.moe_routing})")
    p.add_argument("--moe-a2a-overlap", action="store_true", default=rt.moe_a2a_overlap,
                   help="MoE models: hide the dispatch / combine all-to-alls behind the other microbatch's "
                        "compute (Megatron-Core --overlap-moe-expert-parallel-comm); not searched by plan "
                        "(default: off)")


def _figure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokens", default=None, metavar="N",
                   help="training tokens, e.g. 15T, 2.5e12, 300B: adds the time to train them (days), the GPU-hours "
                        "(devices used x hours) and the energy (MWh; a GPU preset's board TDP, 700 W H100 SXM, 400 W "
                        "A100 SXM, times the devices used: the GPUs only) (default: none)")
    p.add_argument("--usd-per-gpu-hour", default=None, metavar="X",
                   help="price of one GPU-hour: adds the cost of --tokens (default: none)")


MFU_HELP = ("MFU = 3 x forward matrix FLOPs of the model x global batch / (iteration x devices used x the chip's dense "
            "16-bit tensor peak): Megatron's 6N + attention term with all s keys (not halved for the causal mask), "
            "recompute not counted; an FP8 plan's MFU is against the BF16 dense peak and labelled so")


def _chip_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="zoo name, a YAML/JSON model file, hf:CONFIG.json, a traced FILE.json or "
                                                    "torch:MODULE:FACTORY (required)")
    p.add_argument("--accelerator", required=True,
                   help="tpuv4-like | tpuv4 | tpuv4-like-paper | a100-80g | h100-80g or a YAML/JSON chip file (required)")
    p.add_argument("--cluster", default=None, help="network for tensor-parallel collectives (default: dgx-a100 for "
                                                   "a100-80g, dgx-h100 for h100-80g, a chip file's own network "
                                                   "when it has one, else flat-4gib)")


def build_parser() -> argparse.ArgumentParser:
    from phaze.api import LAYER_KINDS
    from phaze.cli import commands as c

    ap = _Parser(prog="phaze", description="Co-design LLM training accelerators and their training plans.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("models", help="list the model zoo")
    p.set_defaults(func=c.cmd_models)

    p = sub.add_parser("show-model", help="parameters, FLOPs, layer kinds, ops and memory of a model")
    p.add_argument("model", help="zoo name, a YAML/JSON model file (docs/model-file.md), hf:CONFIG.json "
                                 "(a Hugging Face config), a traced FILE.json or torch:MODULE:FACTORY")
    _setting_args(p)
    p.add_argument("--check-torch", action="store_true",
                   help="also compare parameters and GEMM FLOPs with PyTorch's counts of the same network "
                        "built in transformers (needs the [torch] extra; --seq defaults to min(model's, 512) "
                        "there; default: off)")
    p.set_defaults(func=c.cmd_show_model)

    p = sub.add_parser("import-model", help="a Hugging Face config.json (or a PyTorch module) as a phaze model")
    p.add_argument("config", nargs="?", default=None, help="a Hugging Face config.json (a local file; default: none, "
                                                           "then --torch is required)")
    p.add_argument("-o", "--output", default=None, help="write the model file here (default: print it): YAML; with --torch, FILE.json "
                                                         "= the traced graphs (plannable) or FILE.yaml = a transformers "
                                                         "module's config")
    p.add_argument("--torch", default=None, metavar="MODULE:FACTORY",
                   help="trace the module FACTORY() returns with torch.export on the meta device and print its "
                        "per-layer operator graph (needs the [torch] extra; default: off)")
    p.add_argument("--mbs", type=int, default=1, help="microbatch size of the --torch trace (default: 1)")
    p.add_argument("--seq", type=int, default=None, help="sequence length of the --torch trace (default: 128)")
    p.set_defaults(func=c.cmd_import_model)

    p = sub.add_parser("arch", help="accelerator presets and the architecture design space: each axis's values, "
                                    "the area window, the number of chips kept")
    p.add_argument("--space", default="default", help="'default' (the chip space with GLB banks, core buffers and "
                                                      "network), 'paper' (the paper's 29,360 chips and areas) or a "
                                                      "YAML/JSON space file (docs/space-file.md) (default: default)")
    p.add_argument("--budget-mm2", type=float, default=None,
                   help="area budget; chips between 0.3 x budget and the budget are kept (default: the TPUv4-like "
                        "chip's area under the space's area model; 278.83 mm^2 for --space paper)")
    p.add_argument("--chip", default=None, metavar="NAME",
                   help="print one chip (a preset or chip file) in the chip-file format; with --json save it as "
                        "FILE.json and pass --accelerator FILE.json (default: none)")
    p.set_defaults(func=c.cmd_arch)

    p = sub.add_parser("estimate", help="per-op latency table and per-layer totals on one chip")
    _chip_args(p)
    _setting_args(p)
    p.set_defaults(func=c.cmd_estimate)

    p = sub.add_parser("schedule", help="optimal per-layer operator schedules on tensor and vector cores")
    _chip_args(p)
    p.add_argument("--layer", choices=LAYER_KINDS, action="append", default=None,
                   help="layer kind(s) to schedule, repeatable (default: all three)")
    p.add_argument("--time-limit", type=float, default=5.0, help="exact-solver limit per layer in seconds; a node "
                   "and work budget derived from it ends the search (default: 5.0)")
    p.add_argument("--gantt", default=None, help="write a Gantt chart of the block's backward: FILE.png (needs the "
                   "[plot] extra) or FILE.txt (default: none)")
    _setting_args(p)
    p.set_defaults(func=c.cmd_schedule)

    p = sub.add_parser("plan", help="the best training plan for a model on N devices",
                       description="The best training plan for a model on N devices. " + MFU_HELP + ".")
    _plan_common(p)
    p.add_argument("--mbs", type=_int_list, default=None, help="microbatch sizes to consider, e.g. 1,2,4 "
                                                              "(default: 1,2,4,8,16)")
    p.add_argument("--recompute", type=_str_list, default=None,
                   help="recompute modes, e.g. none,full (default: none,selective,full)")
    p.add_argument("--top", type=int, default=5, help="runners-up to show (default: 5)")
    p.add_argument("--zero", type=_int_list, default=None,
                   help="ZeRO stages to search, e.g. 0,1: 0 none, 1 optimizer state sharded (distributed optimizer), "
                        "2 also gradients, 3 also weights (FSDP) (default: 0,1,2,3; 0,1 for MoE models)")
    p.add_argument("--cp", type=_int_list, default=None,
                   help="context-parallel sizes to search, e.g. 1,2,4 (needs --attention flash) (default: 1)")
    p.add_argument("--ep", type=_int_list, default=None,
                   help="MoE models: expert-parallel sizes to search, e.g. 1,2,4 (each dividing the experts and "
                        "the devices) (default: every power of two dividing the experts)")
    p.add_argument("--etp", type=_int_list, default=None,
                   help="MoE models: expert tensor-parallel sizes to search, e.g. 1,2 (each dividing the experts' "
                        "intermediate size) (default: every power of two dividing it, up to tp x cp)")
    p.add_argument("--html", default=None, help="also write a self-contained HTML report to this .html file "
                                                "(default: none)")
    p.add_argument("--emit", choices=("megatron", "nemo", "torchtitan"), default=None,
                   help="print the best plan's launch settings: Megatron-Core 0.15 arguments, NeMo 2 recipe "
                        "overrides or a TorchTitan TOML; what the framework cannot express is a comment and a "
                        "warning (default: none)")
    p.add_argument("--emit-file", default=None, metavar="FILE",
                   help="write the --emit settings to FILE instead of printing them (default: none)")
    _figure_args(p)
    p.set_defaults(func=c.cmd_plan)

    p = sub.add_parser("evaluate", help="evaluate one given training plan",
                       description="Evaluate one given training plan. " + MFU_HELP + ".")
    _plan_common(p)
    p.add_argument("--tp", type=int, required=True, help="tensor-parallel width (required)")
    p.add_argument("--pp", type=int, required=True, help="pipeline stages (required)")
    p.add_argument("--dp", type=int, required=True, help="data-parallel replicas (required)")
    p.add_argument("--mbs", type=int, required=True, help="microbatch size in sequences (required)")
    p.add_argument("--interleave", type=int, default=1, help="virtual stages per device (default: 1)")
    p.add_argument("--stage-layers", type=_int_list, default=None,
                   help="blocks per pipeline stage (pp x interleave counts, first to last), e.g. 19,21,21,19; "
                        "the embedding goes with the first, the head with the last (default: as even as possible)")
    p.add_argument("--recompute", type=_str_list, default=("none",),
                   help="one mode (none, selective, full) or one per pipeline stage, e.g. full,full,none,none "
                        "(default: none)")
    p.add_argument("--sequence-parallel", action="store_true", help="Megatron sequence parallelism (default: off)")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=None,
                   help="ZeRO stage over the data-parallel ranks: 0 none, 1 optimizer state sharded (Megatron's "
                        "distributed optimizer), 2 also gradients (reduce-scattered every microbatch), 3 also "
                        "weights (FSDP: gathered before each forward and backward) (default: 0)")
    p.add_argument("--zero1", action="store_true", help="the same as --zero 1 (default: off)")
    p.add_argument("--cp", type=int, default=1,
                   help="context parallelism: each sequence split over N devices, ring attention between them "
                        "(needs --attention flash; devices = tp x pp x cp x dp) (default: 1)")
    p.add_argument("--ep", type=int, default=1,
                   help="MoE models: expert parallelism, the experts split over N devices (N divides the experts; "
                        "ep x etp divides tp x cp x dp, the devices the experts fold over) (default: 1)")
    p.add_argument("--etp", type=int, default=1,
                   help="MoE models: expert tensor parallelism, each expert's FFN split over N devices "
                        "(default: 1)")
    _figure_args(p)
    p.set_defaults(func=c.cmd_evaluate)

    p = sub.add_parser("search", help="co-search accelerator architecture and training plan")
    p.add_argument("--model", action="append", required=True,
                   help="zoo name, model file, hf:CONFIG.json, traced FILE.json or "
                        "torch:MODULE:FACTORY; repeat for several models (required)")
    p.add_argument("--space", default="default", help="'default' (the chip space with GLB banks, core buffers and "
                                                      "network), 'paper' (the paper's 29,360 chips, their areas and "
                                                      "cost model) or a YAML/JSON space file (default: default)")
    p.add_argument("--budget-mm2", type=float, default=None, help="area budget; chips between 0.3 x budget and the "
                   "budget are searched (default: the TPUv4-like chip's area under the space's area model; "
                   "278.83 mm^2 for --space paper)")
    p.add_argument("--devices", type=int, default=1024, help="devices in the cluster (default: 1024, the paper's)")
    p.add_argument("--global-batch", type=int, default=4096, help="sequences per iteration (default: 4096)")
    p.add_argument("--seq", type=int, default=None,
                   help="training sequence length: replaces each model's own (a config's max_position_embeddings "
                        "is not a training length; a learned-position model takes at most its positions) "
                        "(default: the model's)")
    p.add_argument("--mbs", type=_int_list, default=(1, 2, 4, 8), help="microbatch sizes (default: 1,2,4,8)")
    p.add_argument("--tp", type=_int_list, default=None, help="tensor-parallel widths (default: every valid width "
                                                             "up to the model's max_tp)")
    p.add_argument("--hbm-gib", type=_int_list, default=(32, 64, 80), help="HBM sizes per chip in GiB "
                                                                            "(default: 32,64,80)")
    p.add_argument("--recompute", type=_str_list, default=None,
                   help="recompute modes (default: none,selective,full in the full plan space, none,full in the "
                        "paper's)")
    p.add_argument("--plan-space", choices=("paper", "full"), default=None,
                   help="each chip's plans: 'full' (what `phaze plan` searches on GPUs, where a designed chip can "
                        "run it: every interleaving, sequence parallelism, ZeRO 0-3, a recompute mode per "
                        "pipeline stage, the gradient reduce overlapped; standard attention and no TP overlap, "
                        "which the chip model cannot cost) or 'paper' (v = 1, no sequence parallelism, no ZeRO, "
                        "one recompute mode per plan) (default: paper with --space paper, else full)")
    p.add_argument("--cluster", default="flat-4gib", help="network: flat-4gib (the paper's one 4 GiB/s network), "
                                                          "dgx-a100 or dgx-h100 (default: flat-4gib)")
    p.add_argument("--store", default="phaze-results.db", help="SQLite file for results (default: phaze-results.db)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local process pool or Ray (default: local)")
    p.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--resume", action="store_true", help="continue the run in --store (default: off)")
    p.add_argument("--no-prune", action="store_true", help="evaluate every candidate exactly, slow (default: off)")
    p.add_argument("--pareto", action="store_true",
                   help="make the Pareto front of score against area exact over the whole space, slower (default: off)")
    p.add_argument("--export-chip", default=None, metavar="FILE",
                   help="also write the winning chip (its HBM set) as a chip file, .json or .yaml, that "
                        "--accelerator FILE takes (evaluate, plan), with its own network when the space chooses one, the "
                        "default --cluster there (default: none)")
    p.add_argument("--objective", choices=("throughput", "perf-per-area", "perf-per-watt", "perf-per-dollar",
                                            "latency", "edp"),
                   default=None,
                   help="co-search: what the score measures, each relative to the TPUv4-like chip: throughput, "
                        "throughput per mm^2, per W of peak power, or per dollar of TCO at peak power (die, HBM, "
                        "package, energy over 6 years; docs/cost-model.md) (default: throughput); "
                        "--baseline spotlight: latency or edp (default: latency)")
    p.add_argument("--tdp-w", default="reference", metavar="W|reference|none",
                   help="leave out chips whose peak power exceeds W watts; 'reference' caps them at the TPUv4-like "
                        "reference chip's peak power (240 W in the default space), so no winner draws more than "
                        "the chip it is compared with; 'none' lifts the cap; the paper's space has no power model "
                        "and no cap (default: reference)")
    p.add_argument("--plot", default=None, help="directory for PNG plots; needs the [plot] extra (default: none)")
    p.add_argument("--html", default=None, help="write a self-contained HTML report to this .html file "
                                                "(default: none)")
    p.add_argument("--baseline", choices=("spotlight",), default=None,
                   help="instead of the co-search, the Spotlight-style baseline: Bayesian optimisation of one chip "
                        "for the forward + backward latency of the model's layers, then its best plan and the "
                        "paper's plan (one --model; no store; default: off)")
    p.add_argument("--seed", type=int, default=0, help="--baseline spotlight: random seed (default: 0)")
    p.add_argument("--samples", type=int, default=100,
                   help="--baseline spotlight: chips evaluated in all, 10 of them random warm-up (default: 100)")
    p.set_defaults(func=c.cmd_search)

    p = sub.add_parser("reproduce", help="the paper's comparison for its 8 models: co-search winner vs the "
                                         "TPUv4-like chip vs a Spotlight-style chip, each with its best and the "
                                         "paper's plan")
    p.add_argument("--models", type=_str_list, default=None,
                   help="comma-separated models to run, e.g. gpt2-xl,bert-large (default: the paper's 8: "
                        "bert-large, megatron-bert, gpt2-xl, megatron-gpt2-2.5b, megatron-gpt2-8.3b, gpt3-175b, "
                        "opt-350m, llama2-7b)")
    p.add_argument("--seq", type=int, default=None,
                   help="training sequence length: replaces each model's own (a config's max_position_embeddings "
                        "is not a training length; a learned-position model takes at most its positions) "
                        "(default: the model's)")
    p.add_argument("--store", default="phaze-reproduce.db",
                   help="SQLite file holding every model's searches and rows (default: phaze-reproduce.db)")
    p.add_argument("--resume", action="store_true", help="continue the run in --store; finished models are "
                                                         "not recomputed (default: off)")
    p.add_argument("--out", default="phaze-reproduce", help="write the table as OUT.md, OUT.csv and OUT.json "
                                                            "(default: phaze-reproduce)")
    p.add_argument("--html", default=None, help="also write the HTML report to this .html file (default: none)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the Spotlight-style search (default: 0)")
    p.add_argument("--samples", type=int, default=100, help="chips the Spotlight-style search evaluates "
                                                             "(default: 100, Spotlight's)")
    p.add_argument("--space", default="default", help="'default' (the paper's space) or a YAML/JSON space file "
                                                      "(default: default)")
    p.set_defaults(func=c.cmd_reproduce)

    p = sub.add_parser("results", help="show or export a search store")
    p.add_argument("action", choices=("show", "export"), help="show a table, or export JSON/CSV")
    p.add_argument("--store", default="phaze-results.db", help="the search store (default: phaze-results.db)")
    p.add_argument("--format", choices=("json", "csv"), default="json", help="export format (default: json)")
    p.add_argument("--top", type=int, default=10, help="candidates to list (default: 10)")
    p.add_argument("--model", default=None, help="a multi-model search: that model's own ranking (default: the "
                                                 "joint ranking)")
    p.set_defaults(func=c.cmd_results)

    p = sub.add_parser("report", help="a self-contained HTML report of a search store or a reproduce JSON")
    p.add_argument("--store", default=None, help="a search store (default: none; give this or --reproduce)")
    p.add_argument("--reproduce", default=None, help="a `phaze reproduce` JSON file (default: none)")
    p.add_argument("--html", default="phaze-report.html", help="output file (default: phaze-report.html)")
    p.set_defaults(func=c.cmd_report)

    p = sub.add_parser("validate", help="predicted vs published measurements (Megatron-LM on DGX A100, NeMo on "
                                        "DGX H100), a table per source; with --chip the GEMM latency vs ZigZag "
                                        "and SCALE-Sim and its energy vs ZigZag")
    p.add_argument("--cases", default=None, help="a JSON file of cases, measurements or runs shape (default: the "
                                                 "published ones shipped)")
    p.add_argument("--held-out", nargs="?", const="1", default=None, choices=("1", "2", "3", "4"),
                   help="the shipped published runs the model is never tuned on, instead: set 1 (Llama 3.1 on "
                        "H100, the flag alone), 2 (NeMo 24.07 FP8, Megatron-Core H100, MT-NLG on A100), 3 "
                        "(Megatron-LM CI runs on H100 and A100 with measured peak memory) or 4 (Nemotron-4 340B "
                        "on 128-2048 H100, BF16 and FP8) (default: off)")
    p.add_argument("--chip", action="store_true",
                   help="compare phaze's GEMM cycles on one tensor core with ZigZag and SCALE-Sim, and its GEMM "
                        "energy with ZigZag's count of the same schedule, over the shipped panels "
                        "(docs/chip-validation.md, docs/chip-energy-validation.md) instead (default: off)")
    p.add_argument("--moe", action="store_true",
                   help="the Mixture-of-Experts time model against its dev set of published H100 runs "
                        "(DeepSeek-V3, Qwen3-235B-A22B, Qwen3-30B-A3B, GPT-OSS-120B, Mixtral 8x7B) instead "
                        "(default: off)")
    p.set_defaults(func=c.cmd_validate)

    p = sub.add_parser("demo", help="the main job on a built-in default (what `make demo` runs)")
    p.set_defaults(func=c.cmd_demo)

    for name, sp in sub.choices.items():
        sp.add_argument("--json", action="store_true", help="print JSON instead of tables (default: off)")
        if name in ("search", "validate", "demo", "plan", "reproduce"):
            sp.add_argument("--quiet", action="store_true",
                            help="no progress on stderr (default: off; progress is a bar with ETA on a terminal, "
                                 "one line per stage otherwise)")
    return ap


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C (workers stopped, finished results kept)."""


def _on_sigterm(signum, frame):
    raise Terminated()


# Exit statuses of the shell convention 128 + signal number: SIGINT (Ctrl-C) 130, SIGPIPE 141, SIGTERM 143.
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_TERMINATED = 143


def _quiet_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (captured in tests)
        pass


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    parser = build_parser()
    args = parser.parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        return args.func(args) or 0
    except PhazeError as err:
        print(f"phaze: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("phaze: interrupted; finished results are kept (use --resume where supported)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("phaze: terminated (SIGTERM); finished results are kept (use --resume where supported)",
              file=sys.stderr)
        return EXIT_TERMINATED
    except BrokenPipeError:  # the reader of our output went away (e.g. `phaze models | head -1`): end quietly
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, old)


if __name__ == "__main__":
    sys.exit(main())
