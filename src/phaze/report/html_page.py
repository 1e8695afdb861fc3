"""The HTML page around the report's sections: one file, inline CSS, a few lines of inline script (sortable
tables; script errors are recorded on the page so the browser test can see them), no network access."""
from __future__ import annotations

from dataclasses import dataclass

from phaze.report.svg import esc

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1a1a1a;background:#fff}
header{background:#0072B2;color:#fff;padding:16px 28px}
header h1{margin:0 0 4px;font-size:22px} header p{margin:0;opacity:.9}
nav{padding:8px 28px;border-bottom:1px solid #ddd;font-size:14px;position:sticky;top:0;background:#fff}
nav a{margin-right:14px;color:#0072B2;text-decoration:none}
main{padding:0 28px 40px;max-width:1200px}
section{margin-top:26px} h2{font-size:18px;border-bottom:2px solid #E69F00;padding-bottom:3px}
h3{font-size:15px;margin:18px 0 6px}
p.note{color:#444;font-size:13px;max-width:900px}
.answer{background:#f3f8fc;border-left:5px solid #0072B2;padding:10px 16px;font-size:15px}
table{border-collapse:collapse;font-size:13px;margin:6px 0 12px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0;cursor:pointer} td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.win td{background:#fff3d6;font-weight:600}
svg{display:block;margin:8px 0 14px;max-width:100%;height:auto;font-size:12px;font-family:inherit}
svg text{fill:#1a1a1a} svg .ttl{font-size:14px;font-weight:600}
svg .small{font-size:10px} svg .inbar{fill:#fff}
svg .grid{stroke:#e3e3e3;stroke-width:1} svg .tick{stroke:#555}
svg .frame{fill:none;stroke:#555;stroke-width:1}
svg .front{fill:none;stroke-width:1.5}
svg .pt{stroke:#1a1a1a;stroke-width:.6} svg .bar{stroke:#fff;stroke-width:.4}
svg .cap{stroke:#D55E00;stroke-width:2;stroke-dasharray:6 3}
svg .lgbox{fill:#fff;fill-opacity:.85;stroke:#ccc}
svg .pt:hover,svg .bar:hover{stroke:#000;stroke-width:2}
footer{color:#666;font-size:12px;padding:12px 28px;border-top:1px solid #ddd}
"""

# Records script errors on <html data-js-errors> (the browser test reads them from the DOM), then makes
# every table sortable by a click on its header.
SCRIPT = """
(function(){
  var root=document.documentElement; root.dataset.jsErrors="0";
  window.addEventListener("error",function(e){
    root.dataset.jsErrors=String(Number(root.dataset.jsErrors)+1); root.dataset.jsLastError=String(e.message);});
  function key(td){var t=td.getAttribute("data-v"); if(t!==null) return parseFloat(t);
    var s=td.textContent.trim(); var n=parseFloat(s.replace(/,/g,"")); return isNaN(n)?s:n;}
  document.querySelectorAll("table.sortable").forEach(function(tb){
    tb.querySelectorAll("th").forEach(function(th,i){th.title="click to sort";
      th.addEventListener("click",function(){var body=tb.tBodies[0]; var rows=Array.from(body.rows);
        var asc=th.dataset.dir!=="asc"; th.dataset.dir=asc?"asc":"desc";
        rows.sort(function(a,b){var x=key(a.cells[i]),y=key(b.cells[i]);
          var c=(typeof x==="number"&&typeof y==="number")?x-y:String(x).localeCompare(String(y));
          return asc?c:-c;});
        rows.forEach(function(r){body.appendChild(r);});});});});
  root.dataset.rendered="1";
})();
"""


@dataclass(frozen=True)
class Section:
    key: str  # anchor id
    title: str
    body: str  # HTML


def pct(v: float | None) -> tuple[str, float] | None:
    """A fraction shown as a percentage (sorted by its value)."""
    return None if v is None else (f"{v:.1%}", v)


def times(v: float | None) -> tuple[str, float] | None:
    """A ratio shown as 1.23x (sorted by its value)."""
    return None if v is None else (f"{v:.2f}x", v)


def cell(v) -> str:
    if isinstance(v, tuple):  # (text shown, value sorted by)
        return f'<td class="num" data-v="{float(v[1])!r}">{esc(v[0])}</td>'
    if isinstance(v, bool):
        return f"<td>{'yes' if v else 'no'}</td>"
    if isinstance(v, (int, float)):
        return f'<td class="num" data-v="{float(v)!r}">{esc(f"{v:,}" if isinstance(v, int) else f"{v:.4g}")}</td>'
    return f"<td>{esc('-' if v is None else v)}</td>"


def table(headers: list[str], rows: list, highlight: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    win = ' class="win"'
    body = "".join(f"<tr{win if i in highlight else ''}>" + "".join(cell(v) for v in r) + "</tr>"
                   for i, r in enumerate(rows))
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def kv_table(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows) + "</table>"


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def page(title: str, subtitle: str, sections: list[Section]) -> str:
    nav = "".join(f'<a href="#{esc(s.key)}">{esc(s.title)}</a>' for s in sections)
    body = "\n".join(f'<section id="{esc(s.key)}"><h2>{esc(s.title)}</h2>\n{s.body}\n</section>' for s in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>"
            f"<header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header><nav>{nav}</nav>\n<main>{body}</main>"
            f"<footer>Written by phaze. Self-contained: no network access is needed to view it. "
            f"Hover over any point or bar for its details; click a table header to sort.</footer>"
            f"<script>{SCRIPT}</script></body></html>\n")
