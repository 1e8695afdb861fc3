"""The outer co-search over accelerator architectures (and HBM sizes) with the best plan for each.

Public: ``SearchSpec``, ``run_search`` -> ``SearchResult``, ``Store`` (SQLite results).
"""
from phaze.search.run import SearchResult, run_search
from phaze.search.spec import SearchSpec
from phaze.search.store import Store

__all__ = ["SearchSpec", "run_search", "SearchResult", "Store"]
