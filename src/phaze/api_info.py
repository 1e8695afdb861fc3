"""The public API's listing calls: the model zoo, the chip presets and design space, the validation against
published measurements, and a model as a model file. Re-exported by ``phaze.api``, so the CLI calls only it."""
from __future__ import annotations

from dataclasses import dataclass

from phaze.workload.config import ModelConfig


@dataclass(frozen=True)
class ZooEntry:
    model: ModelConfig
    params: int  # whole model, unsharded


def models() -> list[ZooEntry]:
    """Every model of the built-in zoo with its parameter count."""
    from phaze.workload.memory import param_count
    from phaze.workload.zoo import list_models

    return [ZooEntry(m, param_count(m)) for m in list_models()]


def arch(space: str = "default", budget_mm2: float | None = None) -> dict:
    """The chip presets (fields, area, peaks) and the design space (``"default"`` or a space file) under
    ``budget_mm2``: each axis's values, the area window and how many chips it keeps."""
    from dataclasses import asdict

    from phaze.api import check_ranges
    from phaze.hardware.area import area_mm2
    from phaze.hardware.presets import ACCELERATORS
    from phaze.hardware.space import space_summary

    check_ranges(budget_mm2=budget_mm2)
    presets = [{"name": name, "num_tc": acc.num_tc, "tc": f"{acc.tc_rows}x{acc.tc_cols}", "num_vc": acc.num_vc,
                "vc_width": acc.vc_width, "glb_bytes": acc.glb_bytes, "hbm_bytes": acc.hbm_bytes,
                "hbm_bandwidth_Bps": acc.hbm_bandwidth_Bps, "area_mm2": float(area_mm2(acc.as_arrays())[0]),
                "peak_matrix_flops": acc.peak_matrix_flops, "peak_vector_flops": acc.peak_vector_flops,
                "chip_file": asdict(acc)} for name, acc in ACCELERATORS.items()]
    return dict(space_summary(space, budget_mm2), presets=presets)


def chip_file(accelerator: str) -> tuple[str, dict]:
    """A preset (or chip file) as (name, the fields of a chip file: docs/chip-file.md), to save and edit."""
    from dataclasses import asdict

    from phaze.hardware.presets import get_accelerator

    acc = get_accelerator(accelerator)
    return acc.name, asdict(acc)


def validate(cases: str | None = None, quiet: bool = True):
    """Predicted against published iteration times and memory (default: the shipped measurements and runs;
    "held-out" / "held-out-2" / "held-out-3" / "held-out-4": the four sets of runs the model is never tuned on, the
    third with measured peak memory; or a cases JSON file): a ValidationReport with signed % errors.
    ``quiet=False``: progress on stderr."""
    from phaze.progress import Progress
    from phaze.validation import validate as run

    return run(cases, progress=Progress(quiet, prefix="phaze validate"))


def model_file_text(model: ModelConfig, comment: str = "") -> str:
    """``model`` as a YAML model file (read back by ``--model FILE`` into an equal ModelConfig)."""
    from phaze.workload.zoo import model_to_yaml

    return model_to_yaml(model, comment)
