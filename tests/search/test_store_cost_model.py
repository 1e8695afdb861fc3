"""A store written by another revision of the chip cost model is refused on --resume (one line naming the
cost model), instead of mixing chips scored by two models in one answer."""
import pytest

from phaze.errors import StoreError
from phaze.search import Store
from phaze.search.spec import CHIP_COST_MODEL_REVISION
from test_search import spec


def test_fingerprint_carries_the_cost_model_revision():
    assert spec().fingerprint()["cost_model"] == CHIP_COST_MODEL_REVISION >= 4


def test_a_store_from_before_is_refused_on_resume(tmp_path):
    path = tmp_path / "old.db"
    old = {k: v for k, v in spec().fingerprint().items() if k != "cost_model"}  # written before the revision
    Store.open(path, old, False).close()
    with pytest.raises(StoreError, match="cost_model") as err:
        Store.open(path, spec().fingerprint(), True)
    assert len(str(err.value).splitlines()) == 1
    Store.open(path, old, True).close()  # the same parameters still resume


def test_a_store_from_the_previous_revision_is_refused_on_resume(tmp_path):
    path = tmp_path / "rev.db"
    older = dict(spec().fingerprint(), cost_model=CHIP_COST_MODEL_REVISION - 1)
    Store.open(path, older, False).close()
    with pytest.raises(StoreError, match="cost_model"):
        Store.open(path, spec().fingerprint(), True)
