"""The public API's report call: one self-contained HTML report of a finished search store or of a reproduce JSON
(the plan report is ``phaze.api.plan.plan_report``, the live search's ``phaze.api.search.search_report``)."""
from __future__ import annotations

from phaze.api.resolve import check_html_path
from phaze.api.search import load_search, search_report
from phaze.errors import ConfigError

# the fields every reproduce row needs, with their types (the rest the report shows where present)
REPRODUCE_ROW_FIELDS = {"model": str, "role": str, "throughput_seq_per_s": (int, float)}


def load_reproduce_rows(path: str) -> list[dict]:
    """The rows of a ``phaze reproduce`` JSON file ({"rows": [...]}, or a bare list)."""
    from phaze.fileio import read_data_file

    data = read_data_file(path, "reproduce file", fmt="json")
    rows = data.get("rows") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{path}: expected {{\"rows\": [{{...}}, ...]}} as `phaze reproduce` writes it")
    for i, r in enumerate(rows):
        for key, kind in REPRODUCE_ROW_FIELDS.items():
            if key not in r:
                raise ConfigError(f"{path}: row {i} has no field {key!r}")
            if not isinstance(r[key], kind) or isinstance(r[key], bool):
                raise ConfigError(f"{path}: row {i} field {key!r} is {r[key]!r}, not a "
                                  f"{'number' if kind != str else 'string'}; regenerate the file with phaze reproduce")
    return rows


def report(html: str, store: str | None = None, reproduce: str | None = None) -> str:
    """Write one self-contained HTML report from a search store or a reproduce JSON; returns the path."""
    from phaze.report.html import write_reproduce_report

    if (store is None) == (reproduce is None):
        raise ConfigError("give exactly one of --store (a search store) or --reproduce (a reproduce JSON)")
    check_html_path(html)
    if reproduce is None:
        return search_report(load_search(store), html)
    rows = load_reproduce_rows(reproduce)
    try:
        from phaze.report.html_reproduce import reproduce_report_html
        reproduce_report_html(list(rows), None)  # formatted first: a bad field fails before anything is written
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ConfigError(f"{reproduce}: a row has a field of the wrong type or shape ({type(exc).__name__}: {exc}); "
                          f"regenerate the file with phaze reproduce") from None
    return write_reproduce_report(rows, html)
