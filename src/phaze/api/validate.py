"""The public API's validation calls: predicted against published measured training runs (``validate``), and the
chip model against ZigZag and SCALE-Sim (``validate_chip``, ``validate_chip_energy``)."""
from __future__ import annotations


def validate(cases: str | None = None, quiet: bool = True):
    """Predicted against published iteration times and memory (default: the shipped measurements and runs;
    "held-out" / "held-out-2" / "held-out-3" / "held-out-4": the four sets of runs the model is never tuned on, the
    third with measured peak memory; or a cases JSON file): a ValidationReport with signed % errors.
    ``quiet=False``: progress on stderr."""
    from phaze.progress import Progress
    from phaze.validation import validate as run

    return run(cases, progress=Progress(quiet, prefix="phaze validate"))


def validate_chip():
    """phaze's GEMM cycles on one tensor core vs ZigZag and SCALE-Sim over the shipped panel
    (``phaze.validation.chip``; docs/chip-validation.md): a ChipValidationReport with per-case cycles and
    signed errors, mean and max |error| per tool, and whether the goal (15% max, 5% mean vs ZigZag) is met."""
    from phaze.validation.chip import validate_chip as run
    return run()


def validate_chip_energy():
    """phaze's GEMM energy on one tensor core vs ZigZag's minimum-energy mapping under the same per-access
    energies, over the shipped energy panel (``phaze.validation.chip_energy``; docs/chip-validation.md): an
    EnergyReport with per-case energies by part, mean and max |error|, the cases phaze counts below ZigZag's
    minimum, and whether the goal (15% max, 5% mean) is met."""
    from phaze.validation.chip_energy import validate_chip_energy as run
    return run()


def validate_moe():
    """The MoE time model against the shipped dev set of published MoE runs (``phaze.validation.moe``): a
    MoeReport with per-run predicted and measured times, signed errors, fits, and the mean and max |error|."""
    from phaze.validation.moe import validate_moe as run
    return run()
