"""Load a file of ``scripts/`` as a module, for the tests that check an analysis script."""
import importlib.util
from pathlib import Path


def load_script(name: str):
    path = Path(__file__).resolve().parents[2] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
