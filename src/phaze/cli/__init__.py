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
    p.add_argument("--mbs", type=int, default=1, help="microbatch size (sequences)")
    p.add_argument("--seq", type=int, default=None, help="sequence length (default: the model's)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel width")
    p.add_argument("--sequence-parallel", action="store_true", help="Megatron sequence parallelism")
    p.add_argument("--recompute", choices=("none", "selective", "full"), default="none")


def build_parser() -> argparse.ArgumentParser:
    from phaze.cli import commands as c

    ap = _Parser(prog="phaze", description="Co-design LLM training accelerators and their training plans.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("models", help="list the model zoo")
    p.set_defaults(func=c.cmd_models)

    p = sub.add_parser("show-model", help="parameters, FLOPs, layer kinds, ops and memory of a model")
    p.add_argument("model", help="zoo name, a YAML/JSON model file, or hf:CONFIG.json (a Hugging Face config)")
    _setting_args(p)
    p.add_argument("--check-torch", action="store_true",
                   help="also compare parameters and GEMM FLOPs with PyTorch's counts of the same network "
                        "built in transformers (needs the [torch] extra; --seq defaults to min(model's, 512) "
                        "there; default: off)")
    p.set_defaults(func=c.cmd_show_model)

    p = sub.add_parser("import-model", help="a Hugging Face config.json (or a PyTorch module) as a phaze model")
    p.add_argument("config", nargs="?", default=None, help="a Hugging Face config.json (a local file; default: none, "
                                                           "then --torch is required)")
    p.add_argument("-o", "--output", default=None, help="write the model file (YAML) here (default: print it)")
    p.add_argument("--torch", default=None, metavar="MODULE:FACTORY",
                   help="trace the module FACTORY() returns with torch.export on the meta device and print its "
                        "per-layer operator graph (needs the [torch] extra; default: off)")
    p.add_argument("--mbs", type=int, default=1, help="microbatch size of the --torch trace (default: 1)")
    p.add_argument("--seq", type=int, default=None, help="sequence length of the --torch trace (default: 128)")
    p.set_defaults(func=c.cmd_import_model)

    p = sub.add_parser("arch", help="accelerator presets and the architecture design space")
    p.add_argument("--space", default="default", help="'default' or a YAML/JSON space file")
    p.add_argument("--budget-mm2", type=float, default=None, help="area budget (default: the TPUv4-like chip)")
    p.set_defaults(func=c.cmd_arch)

    p = sub.add_parser("estimate", help="per-op latency table and per-layer totals on one chip")
    p.add_argument("--model", required=True)
    p.add_argument("--accelerator", required=True)
    p.add_argument("--cluster", default=None)
    _setting_args(p)
    p.set_defaults(func=c.cmd_estimate)

    p = sub.add_parser("schedule", help="optimal per-layer operator schedules on tensor and vector cores")
    p.add_argument("--model", required=True)
    p.add_argument("--accelerator", required=True)
    p.add_argument("--cluster", default=None)
    p.add_argument("--layer", choices=("embedding", "block", "head"), action="append", default=None,
                   help="layer kind(s) to schedule (default: all)")
    p.add_argument("--time-limit", type=float, default=5.0, help="exact-solver limit per layer, seconds (a node and work budget derived from it ends the search)")
    p.add_argument("--gantt", default=None, help="write a Gantt chart of the block's backward (PNG with [plot], else text)")
    _setting_args(p)
    p.set_defaults(func=c.cmd_schedule)

    def plan_common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--model", required=True)
        p.add_argument("--accelerator", required=True)
        p.add_argument("--devices", type=int, required=True)
        p.add_argument("--global-batch", type=int, required=True)
        p.add_argument("--cluster", default=None, help="dgx-a100 | dgx-h100 | flat-4gib (default by accelerator)")
        p.add_argument("--seq", type=int, default=None)

    p = sub.add_parser("plan", help="the best training plan for a model on N devices")
    plan_common(p)
    p.add_argument("--mbs", type=_int_list, default=None, help="microbatch sizes to consider, e.g. 1,2,4")
    p.add_argument("--recompute", type=_str_list, default=None, help="recompute modes, e.g. none,selective,full")
    p.add_argument("--top", type=int, default=5)
    p.set_defaults(func=c.cmd_plan)

    p = sub.add_parser("evaluate", help="evaluate one given training plan")
    plan_common(p)
    p.add_argument("--tp", type=int, required=True)
    p.add_argument("--pp", type=int, required=True)
    p.add_argument("--dp", type=int, required=True)
    p.add_argument("--mbs", type=int, required=True)
    p.add_argument("--interleave", type=int, default=1)
    p.add_argument("--recompute", type=_str_list, default=("none",),
                   help="one mode (none, selective, full) or one per pipeline stage, e.g. full,full,none,none")
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--zero1", action="store_true", help="shard optimizer state over data-parallel ranks")
    p.set_defaults(func=c.cmd_evaluate)

    p = sub.add_parser("search", help="co-search accelerator architecture and training plan")
    p.add_argument("--model", action="append", required=True, help="repeat for several models")
    p.add_argument("--space", default="default")
    p.add_argument("--budget-mm2", type=float, default=None)
    p.add_argument("--devices", type=int, default=1024)
    p.add_argument("--global-batch", type=int, default=4096)
    p.add_argument("--mbs", type=_int_list, default=(1, 2, 4, 8))
    p.add_argument("--tp", type=_int_list, default=None, help="TP widths (default: every valid width <= max)")
    p.add_argument("--hbm-gib", type=_int_list, default=(32, 64, 80))
    p.add_argument("--recompute", type=_str_list, default=("none", "full"))
    p.add_argument("--cluster", default="flat-4gib")
    p.add_argument("--store", default="phaze-results.db")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--backend", choices=("local", "ray"), default="local")
    p.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--no-prune", action="store_true", help="evaluate every candidate exactly (slow)")
    p.add_argument("--pareto", action="store_true",
                   help="make the Pareto front of score against area exact over the whole space (slower)")
    p.add_argument("--plot", default=None, help="directory for PNG plots (needs the [plot] extra)")
    p.set_defaults(func=c.cmd_search)

    p = sub.add_parser("results", help="show or export a search store")
    p.add_argument("action", choices=("show", "export"))
    p.add_argument("--store", default="phaze-results.db")
    p.add_argument("--format", choices=("json", "csv"), default="json")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--model", default=None, help="a multi-model search: that model's own ranking")
    p.set_defaults(func=c.cmd_results)

    p = sub.add_parser("validate", help="predicted vs published measurements (Megatron-LM on DGX A100)")
    p.add_argument("--cases", default=None, help="a JSON file of cases (default: the published ones shipped)")
    p.set_defaults(func=c.cmd_validate)

    p = sub.add_parser("demo", help="the main job on a built-in default (what `make demo` runs)")
    p.set_defaults(func=c.cmd_demo)

    for sp in sub.choices.values():
        sp.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return ap


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except PhazeError as err:
        print(f"phaze: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("phaze: interrupted; finished results are kept (use --resume where supported)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
