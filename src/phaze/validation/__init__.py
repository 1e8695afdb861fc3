"""Published measurements and the comparison of phaze's time and memory model against them.

``validate(cases=None) -> ValidationReport`` (default: the packaged Megatron-LM / DGX A100 cases of
Korthikanti et al. 2022); ``load_cases(path) -> Cases`` reads a JSON file of the same shape, so a user can add
a case without changing code (docs/validation.md). ``validate_chip()`` compares the GEMM latency with ZigZag
and SCALE-Sim over the shipped panel (docs/chip-validation.md).
"""
from phaze.validation.cases import MODES, Cases, MemoryCase, TimeCase, cases_from_mapping, load_cases, megatron_gpt
from phaze.validation.chip import ChipCase, ChipValidationReport, validate_chip
from phaze.validation.validate import MemoryResult, TimeResult, ValidationReport, validate

__all__ = ["validate", "validate_chip", "ChipValidationReport", "ChipCase", "load_cases", "cases_from_mapping", "ValidationReport", "TimeResult", "MemoryResult",
           "Cases", "TimeCase", "MemoryCase", "MODES", "megatron_gpt"]
