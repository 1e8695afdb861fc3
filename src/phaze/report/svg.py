"""Inline SVG charts for the HTML report, generated here (no plotting library, no network).

Every chart has a title, labelled axes with units, and a <title> on each mark (the browser shows it on
hover). Colours: the Okabe-Ito palette (Okabe & Ito 2008, "Color Universal Design"), distinguishable with
the common colour-vision deficiencies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

# Okabe-Ito: black, orange, sky blue, bluish green, yellow, blue, vermillion, reddish purple
OKABE_ITO = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = OKABE_ITO[1:]
GREY = "#999999"

FONT = 12


def esc(text) -> str:
    return escape(str(text), quote=True)


def text_px(text: str) -> float:
    """Rough width of ``text`` at the chart font size (for layout only)."""
    return 6.6 * len(text)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (steps of 1, 2 or 5 x 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    out, v = [], first
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    if out[-1] < hi:
        out.append(round(out[-1] + step, 12))
    return out


def fmt_num(v: float) -> str:
    """Compact tick label: 1200 -> 1.2k, 0.25 -> 0.25, 3e-6 -> 3e-06."""
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    if a >= 1e-3:
        return f"{v:.6g}"
    return f"{v:.1e}"


@dataclass(frozen=True)
class Frame:
    """Plot area inside an SVG of ``width`` x ``height`` px, with margins for labels."""

    width: int = 640
    height: int = 360
    left: int = 64
    right: int = 16
    top: int = 36
    bottom: int = 48

    @property
    def x0(self) -> float:
        return self.left

    @property
    def x1(self) -> float:
        return self.width - self.right

    @property
    def y0(self) -> float:  # bottom of the plot area (SVG y grows down)
        return self.height - self.bottom

    @property
    def y1(self) -> float:
        return self.top


class Axes:
    """Linear x and y scales over a Frame, and the SVG of the frame, ticks, grid, labels and title."""

    def __init__(self, frame: Frame, xlim: tuple[float, float], ylim: tuple[float, float], *, title: str,
                 xlabel: str, ylabel: str, xticks: list[float] | None = None, yticks: list[float] | None = None,
                 xtick_labels: dict | None = None) -> None:
        self.f = frame
        self.xt = xticks if xticks is not None else nice_ticks(*xlim)
        self.yt = yticks if yticks is not None else nice_ticks(*ylim)
        self.xlim = (min(self.xt[0], xlim[0]), max(self.xt[-1], xlim[1])) if xticks is None else xlim
        self.ylim = (min(self.yt[0], ylim[0]), max(self.yt[-1], ylim[1])) if yticks is None else ylim
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.xtick_labels = xtick_labels or {}

    def x(self, v: float) -> float:
        a, b = self.xlim
        return self.f.x0 + (v - a) / ((b - a) or 1.0) * (self.f.x1 - self.f.x0)

    def y(self, v: float) -> float:
        a, b = self.ylim
        return self.f.y0 - (v - a) / ((b - a) or 1.0) * (self.f.y0 - self.f.y1)

    def frame_svg(self) -> str:
        f = self.f
        out = [f'<text class="ttl" x="{f.width / 2:.1f}" y="18" text-anchor="middle">{esc(self.title)}</text>']
        for t in self.yt:
            if self.ylim[0] - 1e-12 <= t <= self.ylim[1] + 1e-12:
                y = self.y(t)
                out.append(f'<line class="grid" x1="{f.x0}" x2="{f.x1}" y1="{y:.1f}" y2="{y:.1f}"/>')
                out.append(f'<text x="{f.x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{esc(fmt_num(t))}</text>')
        for t in self.xt:
            if self.xlim[0] - 1e-12 <= t <= self.xlim[1] + 1e-12:
                x = self.x(t)
                label = self.xtick_labels.get(t, fmt_num(t))
                out.append(f'<line class="tick" x1="{x:.1f}" x2="{x:.1f}" y1="{f.y0}" y2="{f.y0 + 5}"/>')
                out.append(f'<text x="{x:.1f}" y="{f.y0 + 18}" text-anchor="middle">{esc(label)}</text>')
        out.append(f'<rect class="frame" x="{f.x0}" y="{f.y1}" width="{f.x1 - f.x0}" height="{f.y0 - f.y1}"/>')
        out.append(f'<text x="{(f.x0 + f.x1) / 2:.1f}" y="{f.height - 8}" text-anchor="middle">{esc(self.xlabel)}</text>')
        out.append(f'<text x="14" y="{(f.y0 + f.y1) / 2:.1f}" text-anchor="middle" '
                   f'transform="rotate(-90 14 {(f.y0 + f.y1) / 2:.1f})">{esc(self.ylabel)}</text>')
        return "\n".join(out)


def svg(frame: Frame, body: str, label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {frame.width} {frame.height}" '
            f'width="{frame.width}" height="{frame.height}" role="img" aria-label="{esc(label)}">\n{body}\n</svg>')


def marker(shape: str, x: float, y: float, r: float, color: str, tip: str, cls: str = "pt") -> str:
    """A point mark with a hover tip: circle, square, diamond or star (winner)."""
    t = f"<title>{esc(tip)}</title>"
    if shape == "square":
        return f'<rect class="{cls}" x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" fill="{color}">{t}</rect>'
    if shape == "diamond":
        pts = f"{x:.1f},{y - r * 1.3:.1f} {x + r * 1.3:.1f},{y:.1f} {x:.1f},{y + r * 1.3:.1f} {x - r * 1.3:.1f},{y:.1f}"
        return f'<polygon class="{cls}" points="{pts}" fill="{color}">{t}</polygon>'
    if shape == "star":
        pts = []
        for k in range(10):
            rr = r * 1.6 if k % 2 == 0 else r * 0.7
            a = -math.pi / 2 + k * math.pi / 5
            pts.append(f"{x + rr * math.cos(a):.1f},{y + rr * math.sin(a):.1f}")
        return f'<polygon class="{cls}" points="{" ".join(pts)}" fill="{color}">{t}</polygon>'
    return f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{color}">{t}</circle>'


def legend(items: list[tuple[str, str, str]], x: float, y: float) -> str:
    """(shape, colour, text) rows at (x, y), one under another."""
    out = []
    for i, (shape, color, text) in enumerate(items):
        yy = y + 16 * i
        out.append(marker(shape, x + 6, yy, 4.5, color, text, "lg"))
        out.append(f'<text x="{x + 16}" y="{yy + 4:.1f}">{esc(text)}</text>')
    return "\n".join(out)


@dataclass(frozen=True)
class Series:
    """Points of one kind on a scatter chart: (x, y, hover text) each."""

    name: str
    points: tuple[tuple[float, float, str], ...]
    color: str
    shape: str = "circle"
    radius: float = 3.5
    line: bool = False  # join the points (in x order) with a step line (a Pareto front)


def scatter(series: list[Series], *, title: str, xlabel: str, ylabel: str, frame: Frame = Frame(),
            legend_at: str = "bottom-right", x_from_zero: bool = False) -> str:
    """Points of each series; the y axis starts at 0, the x axis at 0 only with ``x_from_zero`` (otherwise it
    spans the points with a 5% margin, so a cluster of chips of similar area spreads out). The legend goes
    to the corner (``legend_at`` first) that covers the fewest points."""
    xs = [p[0] for s in series for p in s.points]
    ys = [p[1] for s in series for p in s.points]
    if not xs:
        return ""
    pad = 0.05 * ((max(xs) - min(xs)) or abs(max(xs)) or 1.0)
    x_lo = min(0.0, min(xs)) if x_from_zero else min(xs) - pad
    y_hi = max(ys) + 0.08 * ((max(ys) - min(0.0, min(ys))) or 1.0)  # headroom: no mark on the frame
    ax = Axes(frame, (x_lo, max(xs) + (0.0 if x_from_zero else pad)), (min(0.0, min(ys)), y_hi), title=title,
              xlabel=xlabel, ylabel=ylabel)
    body = [ax.frame_svg()]
    for s in series:
        if s.line and len(s.points) > 1:
            pts = sorted(s.points)
            path = [f"M{ax.x(pts[0][0]):.1f},{ax.y(pts[0][1]):.1f}"]
            for (xa, ya, _), (xb, yb, _) in zip(pts, pts[1:]):
                path.append(f"H{ax.x(xb):.1f}V{ax.y(yb):.1f}")
            body.append(f'<path class="front" d="{"".join(path)}" stroke="{s.color}"/>')
        for x, y, tip in s.points:
            body.append(marker(s.shape, ax.x(x), ax.y(y), s.radius, s.color, tip))
    items = [(s.shape, s.color, s.name) for s in series if s.points]
    box_w = 26 + max(text_px(t) for _, _, t in items)
    box_h = 16 * len(items) + 6
    pts = [(ax.x(x), ax.y(y)) for s in series for x, y, _ in s.points]

    def box(corner: str) -> tuple[float, float]:  # (x, y) of the first legend row in that corner
        lx = frame.x1 - box_w if corner.endswith("right") else frame.x0 + 10
        ly = frame.y0 - 12 - 16 * (len(items) - 1) if corner.startswith("bottom") else frame.y1 + 14
        return lx, ly

    def covered(corner: str) -> int:
        lx, ly = box(corner)
        return sum(lx - 10 <= px <= lx + box_w and ly - 16 <= py <= ly - 16 + box_h + 6 for px, py in pts)

    corners = [legend_at] + [c for c in ("bottom-right", "top-left", "top-right", "bottom-left") if c != legend_at]
    lx, ly = box(min(corners, key=lambda c: (covered(c), corners.index(c))))
    body.append(f'<rect class="lgbox" x="{lx - 4}" y="{ly - 12}" width="{box_w:.0f}" height="{box_h}"/>')
    body.append(legend(items, lx, ly))
    return svg(frame, "\n".join(body), title)


def hbars(rows: list[tuple[str, list[tuple[float, str, str]]]], *, title: str, xlabel: str,
          legend_items: list[tuple[str, str]] = (), frame_width: int = 720, row_px: int = 22,
          label_px: int = 200, vline: tuple[float, str] | None = None) -> str:
    """Horizontal stacked bars: rows of (label, [(value, colour, hover text), ...]). ``vline``: (x, text)
    draws a dashed vertical line (e.g. the memory capacity)."""
    n = len(rows)
    placed, lx, ly = [], label_px, 0
    for color, text in legend_items:  # flow the legend left to right, wrapping at the chart's width
        w = 24 + text_px(text)
        if lx + w > frame_width - 10 and lx > label_px:
            lx, ly = label_px, ly + 18
        placed.append((lx, ly, color, text))
        lx += w
    leg_h = ly + 18 if legend_items else 0
    frame = Frame(width=frame_width, height=36 + leg_h + n * row_px + 48, left=label_px, right=24, top=36 + leg_h,
                  bottom=48)
    total = max([sum(v for v, _, _ in parts) for _, parts in rows] + [vline[0] if vline else 0.0, 1e-30])
    ax = Axes(frame, (0.0, total), (0.0, float(n)), title=title, xlabel=xlabel, ylabel="", yticks=[])
    body = [ax.frame_svg()]
    for i, (label, parts) in enumerate(rows):
        y = frame.y1 + i * row_px + 3
        body.append(f'<text x="{frame.x0 - 6}" y="{y + row_px / 2 + 1:.1f}" text-anchor="end">{esc(label)}</text>')
        acc = 0.0
        for v, color, tip in parts:
            if v <= 0:
                continue
            x0, x1 = ax.x(acc), ax.x(acc + v)
            body.append(f'<rect class="bar" x="{x0:.2f}" y="{y:.1f}" width="{max(x1 - x0, 0.5):.2f}" '
                        f'height="{row_px - 6}" fill="{color}"><title>{esc(tip)}</title></rect>')
            acc += v
    if vline is not None:
        x = ax.x(vline[0])
        body.append(f'<line class="cap" x1="{x:.1f}" x2="{x:.1f}" y1="{frame.y1 - 4}" y2="{frame.y0}">'
                    f'<title>{esc(vline[1])}</title></line>')
        body.append(f'<text x="{x - 4:.1f}" y="{frame.y1 - 4}" text-anchor="end" class="small">{esc(vline[1])}</text>')
    for x, yy, color, text in placed:
        y = 28 + yy
        body.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{color}"/>')
        body.append(f'<text x="{x + 16}" y="{y + 10}">{esc(text)}</text>')
    return svg(frame, "\n".join(body), title)
