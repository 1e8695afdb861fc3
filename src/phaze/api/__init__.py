"""The public API: one call per CLI command, each returning plain data a notebook user can inspect.

The package only composes the stages (workload -> cost -> schedule -> placement -> search -> report); every
formula lives in the stage that owns it. One module resolves names and files (``resolve``), one per stage
calls it: ``workload`` (models), ``chip`` (one chip: estimate, schedule, presets), ``plan`` (placement),
``search`` (co-search, reproduce, stores), ``report`` (HTML of stored results), ``validate``. The runtime and
the plan space are built once by the caller (``Runtime``, ``PlanSpace``) and passed whole.
"""
from phaze.api.chip import Estimate, LayerSchedule, OpEstimate, arch, chip_file, estimate, schedule_layers
from phaze.api.plan import (PlanShape, check_emit_file, check_price, evaluate_args, evaluate_plan, launch_settings,
                            parse_count, plan,
                            plan_report, plan_setting, training_figures)
from phaze.api.report import load_reproduce_rows, report
from phaze.api.resolve import (check_html_path, check_ranges, check_tp_overlap_config, default_cluster,
                               resolve_accelerator, resolve_cluster, resolve_model)
from phaze.api.search import (check_export_path, exact_rows, export_chip, load_search, reproduce, results, search,
                              search_report, search_setting,
                              search_spec, spotlight)
from phaze.api.validate import validate, validate_chip, validate_chip_energy, validate_moe
from phaze.api.workload import (ModelSummary, ZooEntry, check_torch, import_model, make_setting, model_file_text,
                                models, show_model)
from phaze.workload.config import GRAD_DTYPES, LAYER_KINDS, OPTIMIZER_STATES
from phaze.workload.runtime import MOE_DISPATCHERS, PAPER_PLAN_SPACE, PAPER_RUNTIME, PlanSpace, Runtime

__all__ = [
    "Estimate", "LayerSchedule", "OpEstimate", "arch", "chip_file", "estimate", "schedule_layers",
    "PlanShape", "evaluate_args", "check_emit_file", "check_price", "launch_settings", "parse_count", "training_figures", "evaluate_plan", "plan", "plan_report", "plan_setting", "load_reproduce_rows", "report",
    "check_html_path", "check_ranges", "check_tp_overlap_config", "default_cluster", "resolve_accelerator",
    "resolve_cluster", "resolve_model", "exact_rows", "export_chip", "check_export_path", "load_search", "reproduce", "results", "search",
    "search_report", "search_setting", "search_spec", "spotlight", "validate", "validate_chip",
    "validate_chip_energy", "validate_moe", "ModelSummary", "ZooEntry", "check_torch", "import_model", "make_setting",
    "model_file_text", "models", "show_model", "MOE_DISPATCHERS", "PAPER_PLAN_SPACE", "PAPER_RUNTIME", "PlanSpace", "Runtime", "GRAD_DTYPES", "LAYER_KINDS", "OPTIMIZER_STATES",
]
