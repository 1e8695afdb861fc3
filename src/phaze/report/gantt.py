"""Gantt charts of one layer's schedule: PNG with matplotlib (the [plot] extra), text otherwise."""
from __future__ import annotations

from pathlib import Path

from phaze.errors import PhazeError


def _rows(ops) -> list[str]:
    rows = sorted({c for op in ops for c in op.cores}, key=lambda c: (c.rstrip("0123456789"), int(c.lstrip("tcvne") or 0)))
    return rows


def gantt_text(ops, width: int = 80) -> str:
    """One line per core; each op drawn with the first letter of its name over its time span."""
    end = max((op.end_s for op in ops), default=0.0) or 1.0
    lines = []
    for core in _rows(ops):
        line = [" "] * width
        for op in ops:
            if core in op.cores:
                a, b = int(op.start_s / end * width), max(int(op.start_s / end * width) + 1, int(op.end_s / end * width))
                for i in range(a, min(b, width)):
                    line[i] = op.name[0]
        lines.append(f"{core:>6} |{''.join(line)}|")
    lines.append(f"{'':>6}  0 {'':>{width - 12}} {end * 1e6:.1f} us")
    return "\n".join(lines)


def _matplotlib(what: str):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PhazeError(f"{what} needs matplotlib: pip install 'phaze[plot]' (or write a .txt chart)") from None
    return plt


def check_gantt_path(path: str) -> Path:
    """Fail before work: a .png (needs the [plot] extra) or .txt file in an existing, writable directory."""
    p = Path(path)
    if p.suffix.lower() not in (".png", ".txt"):
        raise PhazeError(f"--gantt {path}: give a file ending in .png (an image) or .txt (a text chart)")
    if p.suffix.lower() == ".png":
        _matplotlib(f"--gantt {path}")
    parent = p.parent if str(p.parent) else Path(".")
    from phaze.report.plots import writable_dir

    if not parent.is_dir() or not writable_dir(parent):
        raise PhazeError(f"--gantt {path}: directory {parent} does not exist or is not writable; pick another path")
    return p


def write_gantt(ops, path: str, title: str = "") -> str:
    """Write a PNG if the path ends in .png (an error without matplotlib), else a text chart. Returns the path."""
    p = Path(path)
    if p.suffix.lower() == ".png":
        plt = _matplotlib(f"--gantt {path}")
        rows = _rows(ops)
        fig, ax = plt.subplots(figsize=(10, 0.35 * len(rows) + 1.5))
        colors = {"tc": "tab:blue", "vc": "tab:orange", "net": "tab:green"}
        for op in ops:
            for core in op.cores:
                y = rows.index(core)
                ax.barh(y, (op.end_s - op.start_s) * 1e6, left=op.start_s * 1e6, color=colors.get(op.kind, "grey"),
                        edgecolor="black", linewidth=0.3)
        ax.set_yticks(range(len(rows)), rows)
        ax.invert_yaxis()
        ax.set_xlabel("time in the layer (us)")
        ax.set_ylabel("core (tc: tensor, vc: vector, net: network)")
        ax.set_title(title or "layer schedule")
        fig.tight_layout()
        try:
            fig.savefig(p, dpi=120)
        except OSError as err:
            raise PhazeError(f"cannot write Gantt chart to {p}: {err.strerror}; pick a writable path") from None
        plt.close(fig)
        return str(p)
    try:
        p.write_text((title + "\n" if title else "") + gantt_text(ops) + "\n")
    except OSError as err:
        raise PhazeError(f"cannot write Gantt chart to {p}: {err.strerror}; pick a writable path") from None
    return str(p)
