"""Write the launch-settings fixtures of tests/fixtures/ from the frameworks' own sources (run by hand; the tests
read the fixtures only, never this script).

    python scripts/launch_fixtures.py MEGATRON_GIT_DIR TORCHTITAN_GIT_DIR NEMO_GIT_DIR

Each GIT_DIR is a clone (bare is fine) of NVIDIA/Megatron-LM, pytorch/torchtitan and NVIDIA/NeMo; the files are
read at the refs below with ``git show`` and parsed with ``ast`` (nothing is imported or run):

- megatron_core_0_15_arguments.txt: every ``--flag`` string that ``add_argument`` is called with in
  ``megatron/training/arguments.py`` (Megatron-Core 0.15).
- torchtitan_job_config_keys.txt: every ``section.key`` (nested tables as ``a.b.key``) of the dataclasses
  ``JobConfig`` is built from in ``torchtitan/config/job_config.py`` (the TOML file's tables and keys).
- nemo2_recipe_attributes.txt: the recipe attribute paths a NeMo 2 pretraining recipe (e.g.
  ``nemo/collections/llm/recipes/llama3_70b.py``) builds: ``trainer.strategy.*`` (``MegatronStrategy.__init__``),
  ``trainer.strategy.ddp.*`` (Megatron-Core's ``DistributedDataParallelConfig``), ``trainer.plugins.*``
  (``MegatronMixedPrecision.__init__``), ``data.*`` (``MockDataModule.__init__``), ``optim.config.*``
  (Megatron-Core's ``OptimizerConfig``), ``model.config.*`` (Megatron-Core's ``TransformerConfig`` and its base
  ``ModelParallelConfig``; NeMo's GPT configs subclass it).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

MEGATRON_REF = "core_v0.15.3"
TORCHTITAN_REF = "v0.2.2"
NEMO_REF = "v2.4.0"
OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def show(git_dir: str, ref: str, path: str) -> str:
    return subprocess.run(["git", "-C", git_dir, "show", f"{ref}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def commit(git_dir: str, ref: str) -> str:
    return subprocess.run(["git", "-C", git_dir, "rev-parse", f"{ref}^{{commit}}"], check=True, capture_output=True,
                          text=True).stdout.strip()


def megatron_flags(src: str) -> list[str]:
    out = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                    out.add(a.value)
    return sorted(out)


def dataclass_fields(src: str) -> dict[str, list[tuple[str, str]]]:
    """class name -> [(field, annotation source)] of every class's annotated class-level fields."""
    tree = ast.parse(src)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = [(s.target.id, ast.unparse(s.annotation)) for s in node.body
                              if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    return out


def torchtitan_keys(src: str) -> list[str]:
    classes = dataclass_fields(src)
    out = []

    def walk(cls: str, prefix: str) -> None:
        for name, ann in classes[cls]:
            if ann in classes:  # a nested table
                walk(ann, f"{prefix}{name}.")
            else:
                out.append(prefix + name)

    for name, ann in classes["JobConfig"]:
        walk(ann, f"{name}.")
    return sorted(out)


def init_params(src: str, cls: str) -> list[str]:
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__init__":
                    a = f.args
                    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg != "self"]
    raise SystemExit(f"no {cls}.__init__")


def header(lines: list[str], what: str, sources: list[tuple[str, str, str, str]]) -> str:
    h = [f"# {what}", "# written by scripts/launch_fixtures.py; one name a line"]
    h += [f"# source: {repo} {ref} (commit {c}) {path}" for repo, ref, c, path in sources]
    return "\n".join(h + lines) + "\n"


def main(megatron: str, torchtitan: str, nemo: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    mc = commit(megatron, MEGATRON_REF)
    path = "megatron/training/arguments.py"
    (OUT / "megatron_core_0_15_arguments.txt").write_text(header(
        megatron_flags(show(megatron, MEGATRON_REF, path)), "Megatron-Core 0.15 command-line flags",
        [("NVIDIA/Megatron-LM", MEGATRON_REF, mc, path)]))

    tc = commit(torchtitan, TORCHTITAN_REF)
    path = "torchtitan/config/job_config.py"
    (OUT / "torchtitan_job_config_keys.txt").write_text(header(
        torchtitan_keys(show(torchtitan, TORCHTITAN_REF, path)), "TorchTitan TOML keys (table.key)",
        [("pytorch/torchtitan", TORCHTITAN_REF, tc, path)]))

    nc = commit(nemo, NEMO_REF)
    nemo_files = {"trainer.strategy.": ("nemo/lightning/pytorch/strategies/megatron_strategy.py", "MegatronStrategy"),
                  "trainer.plugins.": ("nemo/lightning/pytorch/plugins/mixed_precision.py", "MegatronMixedPrecision"),
                  "data.": ("nemo/collections/llm/gpt/data/mock.py", "MockDataModule")}
    names, sources = [], []
    for prefix, (p, cls) in nemo_files.items():
        names += [prefix + n for n in init_params(show(nemo, NEMO_REF, p), cls) if n != "kwargs"]
        sources.append(("NVIDIA/NeMo", NEMO_REF, nc, f"{p} {cls}.__init__"))
    core = {"trainer.strategy.ddp.": [("megatron/core/distributed/distributed_data_parallel_config.py",
                                       "DistributedDataParallelConfig")],
            "optim.config.": [("megatron/core/optimizer/optimizer_config.py", "OptimizerConfig")],
            "model.config.": [("megatron/core/model_parallel_config.py", "ModelParallelConfig"),
                              ("megatron/core/transformer/transformer_config.py", "TransformerConfig")]}
    for prefix, files in core.items():
        for p, cls in files:
            names += [prefix + n for n, _ in dataclass_fields(show(megatron, MEGATRON_REF, p))[cls]]
            sources.append(("NVIDIA/Megatron-LM", MEGATRON_REF, mc, f"{p} {cls}"))
    (OUT / "nemo2_recipe_attributes.txt").write_text(header(
        sorted(set(names)), "NeMo 2 recipe attribute paths (recipe.<path>)", sources))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
