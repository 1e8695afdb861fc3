"""PNG plots of a co-search (the [plot] extra): the Pareto front and the winner vs the TPUv4-like chip."""
from __future__ import annotations

from pathlib import Path

from phaze.errors import PhazeError


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PhazeError("--plot needs matplotlib: pip install 'phaze[plot]' (or use --html, which needs nothing)") from None
    return plt


def check_plot_dir(directory: str) -> Path:
    """Fail before work, creating nothing: matplotlib importable, and the directory (or, if it does not exist
    yet, its nearest existing parent) a writable directory."""
    _pyplot()
    d = Path(directory)
    probe = d
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise PhazeError(f"--plot {directory}: {probe} is not a directory; pick another --plot")
    if not writable_dir(probe):
        raise PhazeError(f"--plot {directory}: directory {probe} is not writable; pick another --plot")
    return d


def writable_dir(d: Path) -> bool:
    """Whether a file can be created in ``d`` (tried, so read-only file systems count too, even for root)."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=d):
            return True
    except OSError:
        return False


def search_plots(res, directory: str) -> list[str]:
    """Write the plots of a search into ``directory`` (created if needed); an OS error is one PhazeError line."""
    d = check_plot_dir(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        return _plots(res, d)
    except OSError as err:
        raise PhazeError(f"cannot write plots to {d}: {err.strerror or err}; pick another --plot (the search's "
                         f"results are in its store)") from None


def _plots(res, d: Path) -> list[str]:
    plt = _pyplot()
    written = []
    if res.pareto:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.step([r.area_mm2 for r in res.pareto], [r.score for r in res.pareto], where="post", marker="o")
        ax.set_xlabel("chip area (mm^2)")
        ax.set_ylabel("score (throughput / TPUv4-like best plan)")
        exact = res.spec.get("pareto")
        ax.set_title("Pareto front" + ("" if exact else " (exactly evaluated candidates)"))
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(d / "pareto.png", dpi=120)
        plt.close(fig)
        written.append(str(d / "pareto.png"))
    if res.best:
        names = [r.model for r in res.references]
        best = [o.throughput_seq_per_s for o in res.best.outcomes]
        tpu = [r.best_seq_per_s for r in res.references]
        paper = [r.paper_seq_per_s for r in res.references]
        fig, ax = plt.subplots(figsize=(6, 4))
        x = range(len(names))
        w = 0.27
        ax.bar([i - w for i in x], paper, w, label="TPUv4-like, paper plan")
        ax.bar(list(x), tpu, w, label="TPUv4-like, best plan")
        ax.bar([i + w for i in x], best, w, label="searched chip, best plan")
        ax.set_xticks(list(x), names)
        ax.set_xlabel("model")
        ax.set_ylabel("training throughput (sequences / s)")
        ax.set_title("Searched chip against the TPUv4-like chip")
        ax.legend()
        fig.tight_layout()
        fig.savefig(d / "winner_vs_tpuv4.png", dpi=120)
        plt.close(fig)
        written.append(str(d / "winner_vs_tpuv4.png"))
    return written
