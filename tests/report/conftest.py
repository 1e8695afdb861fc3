"""A tiny co-search and a small plan, shared by the HTML report tests (each computed once per session)."""
import pytest

from phaze.search import SearchSpec, Store, run_search
from phaze.search.results import chip_rows
from tinysearch import SPACE, TINY


@pytest.fixture(scope="session")
def tiny_search(tmp_path_factory):
    """(SearchResult, every exactly evaluated row as a ChipRow) of a 33-chip search of a 4-block model on 16 devices."""
    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1, 2),
                      recompute_modes=("none", "full"), devices=16, global_batch=32)
    path = str(tmp_path_factory.mktemp("report") / "tiny.db")
    res = run_search(spec, path, workers=1, quiet=True)
    s = Store.open_existing(path)
    rows = list(chip_rows(s.rows(status="exact")))
    s.close()
    return res, rows


@pytest.fixture(scope="session")
def small_plan():
    """A plan run on designed chips (so its block has a schedule): gpt2-xl on 16 TPUv4-like chips."""
    from phaze import api
    args = dict(model="gpt2-xl", accelerator="tpuv4-like", devices=16, global_batch=64)
    return api.plan(args["model"], args["accelerator"], args["devices"], args["global_batch"],
                    space=api.PlanSpace(microbatch_sizes=(1, 2)), top_k=3), args
