"""phaze: integrated accelerator architecture and device placement search for LLM training.

The public API is one call per CLI command (``phaze.api``); the most used are re-exported here.
``phaze.co_search`` is ``phaze.api.search`` (the name ``phaze.search`` is the search stage's package).
"""
from phaze.api import (arch, check_torch, estimate, evaluate_plan, import_model, models, plan, results, schedule_layers,
                       show_model, validate, validate_chip, validate_chip_energy)
from phaze.api import search as co_search
from phaze.errors import PhazeError
from phaze.api import PAPER_PLAN_SPACE, PAPER_RUNTIME, PlanShape, PlanSpace, Runtime

__version__ = "0.1.0"
__all__ = ["models", "show_model", "import_model", "check_torch", "arch", "estimate", "schedule_layers", "plan",
           "evaluate_plan", "co_search", "results", "validate", "validate_chip", "validate_chip_energy",
           "PhazeError", "Runtime", "PlanSpace", "PlanShape", "PAPER_RUNTIME", "PAPER_PLAN_SPACE", "__version__"]
