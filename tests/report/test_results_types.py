"""The typed search results (``phaze.search.results``): each type reads back what it writes, on a real tiny
search; the dicts are exactly what the store keeps; a damaged store row is one StoreError line."""
import json
import sqlite3

import pytest

from phaze import api
from phaze.errors import StoreError
from phaze.search.results import AtHbm, ChipRow, Outcome, ReferenceRow, SearchResult, chip_rows


def _each(res):
    """Every typed object of a result, with its type."""
    rows = ([res.best] if res.best else []) + list(res.pareto) + list(res.per_model)
    yield SearchResult, res
    for r in rows:
        yield ChipRow, r
        for o in r.outcomes:
            yield Outcome, o
    for ref in res.references + res.real_references:
        yield ReferenceRow, ref
        if ref.at_best_hbm is not None:
            yield AtHbm, ref.at_best_hbm


def test_round_trip_on_a_real_search(tiny_search):
    res, rows = tiny_search
    seen = set()
    for cls, x in _each(res):
        assert cls.from_dict(x.to_dict()) == x
        assert cls.from_dict(json.loads(json.dumps(x.to_dict()))) == x  # through JSON, as the store keeps it
        seen.add(cls)
    assert seen >= {SearchResult, ChipRow, Outcome, ReferenceRow}
    assert res.best.explained and all(o.explained for o in res.best.outcomes)
    for r in rows:  # unexplained store rows
        assert not r.explained and ChipRow.from_dict(r.to_dict()) == r


def test_to_dict_is_the_stored_row(tiny_search):
    """Unexplained rows give back the store's dict key for key and in order; the explained rows and the
    references equal what the store's meta keeps."""
    from phaze.search import Store

    res, rows = tiny_search
    s = Store.open_existing(res.store)
    try:
        stored = s.rows(status="exact")
        assert [list(r.to_dict().items()) for r in rows] == [list(d.items()) for d in stored]
        explained = s.get_meta("explained")
        assert explained["best"] == res.best.to_dict()
        assert explained["pareto"] == [r.to_dict() for r in res.pareto]
        assert s.get_meta("references") == [r.to_dict() for r in res.references]
        assert s.get_meta("real_references") == [r.to_dict() for r in res.real_references]
    finally:
        s.close()


def test_loaded_result_equals_the_run(tiny_search):
    res, _ = tiny_search
    again = api.load_search(res.store)
    assert again.best == res.best and again.pareto == res.pareto and again.references == res.references
    assert api.exact_rows(res.store) == tiny_search[1]


@pytest.mark.parametrize("column,value,says", [
    ("score", "'high'", "field 'score' is 'high', not an integer or a number"),
    ("outcomes", "'[{\"model\": \"tiny\"}]'", "has no field 'throughput_seq_per_s'"),
    ("outcomes", "'{}'", "field 'outcomes' is {}, not a list"),
])
def test_a_damaged_store_row_is_one_store_error(tiny_search, tmp_path, column, value, says):
    import shutil

    res, _ = tiny_search
    path = str(tmp_path / "bad.db")
    shutil.copy(res.store, path)
    con = sqlite3.connect(path)
    with con:
        con.execute(f"UPDATE results SET {column}={value}")
    con.close()
    for call in (lambda: api.results(path), lambda: api.load_search(path), lambda: api.exact_rows(path)):
        with pytest.raises(StoreError) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg and says in msg and "rerun the search" in msg


def test_wrong_typed_fields_name_the_field():
    good = {"model": "m", "throughput_seq_per_s": 1.0, "iteration_time_s": 2.0, "mfu": 0.5, "plan": "p",
            "plan_json": None}
    assert Outcome.from_dict(good) == Outcome("m", 1.0, 2.0, 0.5, "p", None)
    for key, bad in (("mfu", True), ("plan", 3), ("plan_json", [1])):
        with pytest.raises(StoreError, match=f"field '{key}'"):
            Outcome.from_dict(dict(good, **{key: bad}))
    with pytest.raises(StoreError, match="not an object"):
        chip_rows([3])
    with pytest.raises(StoreError, match="has no field 'power_w'"):  # explained (glb_banks) but no power
        ChipRow.from_dict({"chip": 1, "hbm_gib": 1, "status": "exact", "score": 1.0, "area_mm2": 1.0,
                           "num_tc": 1, "tc_rows": 1, "tc_cols": 1, "num_vc": 1, "vc_width": 1, "glb_bytes": 1,
                           "outcomes": [], "schedules_solved": 0, "schedules_not_optimal": 0, "glb_banks": 0,
                           "glb_bank_width_bytes": 0, "noc": "mesh", "glb_bandwidth_Bps": None,
                           "peak_power_w": None})


def test_unknown_keys_are_ignored():
    """A key this version does not know is dropped (the fingerprint refuses stores of other versions)."""
    d = {"model": "m", "throughput_seq_per_s": 1.0, "iteration_time_s": 2.0, "mfu": 0.5, "plan": "p",
         "plan_json": None, "from_the_future": 1}
    assert "from_the_future" not in Outcome.from_dict(d).to_dict()
