"""Typed results of a co-search: a model's outcome on a chip, a chip row, the TPUv4-like reference row, and
``SearchResult``. The store and the JSON outputs keep dicts: ``to_dict()`` gives exactly the dict phaze has
always written (same keys, same order), ``from_dict()`` reads one back and checks every field's type, so a
damaged or foreign store row is one ``StoreError`` line instead of a KeyError deep in a report.

Optional facts (power, bounds, the on-chip hierarchy) are present in a dict only once a row is explained
(``phaze.search.explain``); each type keeps that as ``explained`` so ``to_dict`` writes back exactly the keys it
read. Keys a type does not know are ignored on purpose: the store's fingerprint (its cost-model revision)
already refuses a store of another phaze version, and outputs list only what this version computes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from phaze.errors import StoreError

_NONE = type(None)
_NUM = (int, float)
_FIX = "the store is damaged or from another phaze version; rerun the search into a new --store"
_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", dict: "an object",
               list: "a list", _NONE: "null"}


def _get(d: dict, key: str, kinds: tuple, where: str, required: bool = True):
    """``d[key]`` checked against ``kinds`` (bool is never taken for a number); absent and not ``required``:
    None. A missing or wrong-typed field is a one-line StoreError naming ``where`` and the field."""
    if key not in d:
        if required:
            raise StoreError(f"{where} has no field {key!r}; {_FIX}")
        return None
    v = d[key]
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        want = " or ".join(dict.fromkeys(_KIND_NAMES.get(k, k.__name__) for k in kinds))
        raise StoreError(f"{where} field {key!r} is {v!r:.60}, not {want}; {_FIX}")
    return v


def _mapping(d, where: str) -> dict:
    if not isinstance(d, dict):
        raise StoreError(f"{where} is {d!r:.60}, not an object; {_FIX}")
    return d


# the facts ``explain.chip_facts`` adds to a chip (in its order); the hierarchy-only ones are absent, not null,
# on a chip of the paper's template
CHIP_FACTS = ("glb_banks", "glb_bank_width_bytes", "tc_operand_bytes", "tc_acc_bytes", "noc", "noc_link_bytes",
              "input_staging",
              "glb_bandwidth_Bps", "peak_power_w")
_HIERARCHY_ONLY = ("tc_operand_bytes", "tc_acc_bytes", "noc_link_bytes", "input_staging")
_FACT_KINDS = {"glb_banks": (int,), "glb_bank_width_bytes": (int,), "tc_operand_bytes": (int,),
               "tc_acc_bytes": (int,), "noc": (str,), "noc_link_bytes": (int,), "input_staging": (bool,), "glb_bandwidth_Bps": _NUM + (_NONE,),
               "peak_power_w": _NUM + (_NONE,)}


def _chip_facts_dict(obj) -> dict:
    return {k: getattr(obj, k) for k in CHIP_FACTS if k not in _HIERARCHY_ONLY or getattr(obj, k) is not None}


def _chip_facts_from(d: dict, where: str) -> dict:
    return {k: _get(d, k, _FACT_KINDS[k], where, required=k not in _HIERARCHY_ONLY) for k in CHIP_FACTS}


@dataclass(frozen=True)
class Outcome:
    """One model's best plan on one chip (at one HBM size): throughput 0 and an empty plan when nothing fits.
    Explained (``explained``): the plan's average power, energy per iteration, GLB demand and what bounds its
    time (``phaze.placement.power``), absent for a plan-less outcome or an unexplained row."""

    model: str
    throughput_seq_per_s: float
    iteration_time_s: float  # inf when nothing fits
    mfu: float
    plan: str  # Plan.describe(), one line
    plan_json: dict | None  # Plan.to_dict(): the plan as stored, rebuilt by Plan.from_dict
    explained: bool = False
    power_w: float | None = None
    energy_j: float | None = None
    glb_demand_Bps: float | None = None
    bound_by: str | None = None  # compute, glb, hbm, network, bubble or optimizer
    time_by_bound_s: dict | None = None  # bound -> seconds of the iteration

    FACTS = ("power_w", "energy_j", "glb_demand_Bps", "bound_by", "time_by_bound_s")

    def to_dict(self) -> dict:
        d = {"iteration_time_s": self.iteration_time_s, "mfu": self.mfu, "model": self.model, "plan": self.plan,
             "plan_json": self.plan_json, "throughput_seq_per_s": self.throughput_seq_per_s}
        if self.explained:
            d.update((k, getattr(self, k)) for k in self.FACTS)
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "outcome") -> "Outcome":
        d = _mapping(d, where)
        explained = "power_w" in d
        return cls(_get(d, "model", (str,), where), _get(d, "throughput_seq_per_s", _NUM, where),
                   _get(d, "iteration_time_s", _NUM, where), _get(d, "mfu", _NUM, where),
                   _get(d, "plan", (str,), where), _get(d, "plan_json", (dict, _NONE), where), explained,
                   _get(d, "power_w", _NUM + (_NONE,), where, explained),
                   _get(d, "energy_j", _NUM + (_NONE,), where, explained),
                   _get(d, "glb_demand_Bps", _NUM + (_NONE,), where, explained),
                   _get(d, "bound_by", (str, _NONE), where, explained),
                   _get(d, "time_by_bound_s", (dict, _NONE), where, explained))


# a store row's columns (``Store.rows``), in the table's order
_ROW_KINDS = {"chip": (int,), "hbm_gib": (int,), "status": (str,), "score": _NUM, "area_mm2": _NUM,
              "num_tc": (int, _NONE), "tc_rows": (int, _NONE), "tc_cols": (int, _NONE), "num_vc": (int, _NONE),
              "vc_width": (int, _NONE), "glb_bytes": (int, _NONE), "outcomes": (list,),
              "schedules_solved": (int, _NONE), "schedules_not_optimal": (int, _NONE)}


@dataclass(frozen=True)
class ChipRow:
    """One candidate chip at one HBM size as the store keeps it (``chip`` indexes the candidates the search
    numbered), with one ``Outcome`` per model. Explained (the winner, the front, each model's own best): the
    chip's on-chip hierarchy, GLB bandwidth, peak power and the mean ``power_w`` of its plans. ``model``: set
    on a multi-model search's per-model rows (that model searched alone)."""

    chip: int
    hbm_gib: int
    status: str  # exact | bounded | infeasible
    score: float  # mean normalized throughput (exact), or the upper bound when bounded
    area_mm2: float
    num_tc: int | None
    tc_rows: int | None
    tc_cols: int | None
    num_vc: int | None
    vc_width: int | None
    glb_bytes: int | None
    outcomes: tuple[Outcome, ...]
    schedules_solved: int | None
    schedules_not_optimal: int | None
    model: str | None = None
    explained: bool = False
    glb_banks: int | None = None  # 0 on a chip of the paper's template (no hierarchy)
    glb_bank_width_bytes: int | None = None
    tc_operand_bytes: int | None = None  # the hierarchy's; None without it
    tc_acc_bytes: int | None = None
    noc: str | None = None
    noc_link_bytes: int | None = None
    input_staging: bool | None = None  # the hierarchy's input staging buffer (issue 34 item 1d); None without it
    glb_bandwidth_Bps: float | None = None  # None: not modelled
    peak_power_w: float | None = None
    power_w: float | None = None  # mean over the models' plans; None: no power model

    def to_dict(self) -> dict:
        d = {} if self.model is None else {"model": self.model}
        for k in _ROW_KINDS:
            d[k] = [o.to_dict() for o in self.outcomes] if k == "outcomes" else getattr(self, k)
        if self.explained:
            d.update(_chip_facts_dict(self), power_w=self.power_w)
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "store row") -> "ChipRow":
        d = _mapping(d, where)
        where = f"{where} (chip {d.get('chip')!r}, HBM {d.get('hbm_gib')!r} GiB)"
        cols = {k: _get(d, k, kinds, where) for k, kinds in _ROW_KINDS.items()}
        cols["outcomes"] = tuple(Outcome.from_dict(o, f"{where} outcome {i}") for i, o in enumerate(cols["outcomes"]))
        explained = "glb_banks" in d
        facts = _chip_facts_from(d, where) if explained else {}
        if explained:
            facts["power_w"] = _get(d, "power_w", _NUM + (_NONE,), where)
        return cls(**cols, model=_get(d, "model", (str,), where, required=False), explained=explained, **facts)

    def chip_fields(self) -> dict:
        """The chip's shape fields (what rebuilding it checks against the stored design space)."""
        return {k: getattr(self, k) for k in ("num_tc", "tc_rows", "tc_cols", "num_vc", "vc_width", "glb_bytes")}


@dataclass(frozen=True)
class AtHbm:
    """The reference chip's best plan at another HBM size (the winner's): 0 seq/s and the reason when none fits."""

    hbm_gib: float
    best_seq_per_s: float
    best_plan: str

    def to_dict(self) -> dict:
        return {"hbm_gib": self.hbm_gib, "best_seq_per_s": self.best_seq_per_s, "best_plan": self.best_plan}

    @classmethod
    def from_dict(cls, d: dict, where: str = "at_best_hbm") -> "AtHbm":
        d = _mapping(d, where)
        return cls(_get(d, "hbm_gib", _NUM, where), _get(d, "best_seq_per_s", _NUM, where),
                   _get(d, "best_plan", (str,), where))


@dataclass(frozen=True)
class ReferenceRow:
    """The TPUv4-like chip for one model: under its best plan (the co-search's plan space; 0 seq/s and "none
    fits: ..." when nothing fits) and under the paper's fixed plan, with the chip's facts. Explained (when its
    best plan exists): that plan's power and what bounds its time. ``at_best_hbm``: its best plan at the
    winner's HBM size, where that differs from its own."""

    model: str
    area_mm2: float
    hbm_gib: float
    chip_name: str
    glb_banks: int
    glb_bank_width_bytes: int
    noc: str
    glb_bandwidth_Bps: float | None
    peak_power_w: float | None
    best_seq_per_s: float
    best_plan: str
    best_mfu: float
    paper_seq_per_s: float
    paper_plan: str  # its description, or why it was not built
    paper_fits: bool
    paper_reason: str
    tc_operand_bytes: int | None = None
    tc_acc_bytes: int | None = None
    noc_link_bytes: int | None = None
    input_staging: bool | None = None  # the hierarchy's input staging buffer (issue 34 item 1d); None without it
    explained: bool = False
    power_w: float | None = None
    bound_by: str | None = None
    time_by_bound_s: dict | None = None
    glb_demand_Bps: float | None = None
    at_best_hbm: AtHbm | None = None

    def to_dict(self) -> dict:
        d = {"model": self.model, "area_mm2": self.area_mm2, "hbm_gib": self.hbm_gib, "chip_name": self.chip_name,
             **_chip_facts_dict(self), "best_seq_per_s": self.best_seq_per_s, "best_plan": self.best_plan,
             "best_mfu": self.best_mfu}
        if self.explained:
            d.update(power_w=self.power_w, bound_by=self.bound_by, time_by_bound_s=self.time_by_bound_s,
                     glb_demand_Bps=self.glb_demand_Bps)
        d.update(paper_seq_per_s=self.paper_seq_per_s, paper_plan=self.paper_plan, paper_fits=self.paper_fits,
                 paper_reason=self.paper_reason)
        if self.at_best_hbm is not None:
            d["at_best_hbm"] = self.at_best_hbm.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "reference") -> "ReferenceRow":
        d = _mapping(d, where)
        where = f"{where} ({d.get('model')!r})"
        explained = "bound_by" in d
        at = d.get("at_best_hbm")
        return cls(_get(d, "model", (str,), where), _get(d, "area_mm2", _NUM, where), _get(d, "hbm_gib", _NUM, where),
                   _get(d, "chip_name", (str,), where), **_chip_facts_from(d, where),
                   best_seq_per_s=_get(d, "best_seq_per_s", _NUM, where), best_plan=_get(d, "best_plan", (str,), where),
                   best_mfu=_get(d, "best_mfu", _NUM, where), paper_seq_per_s=_get(d, "paper_seq_per_s", _NUM, where),
                   paper_plan=_get(d, "paper_plan", (str,), where), paper_fits=_get(d, "paper_fits", (bool,), where),
                   paper_reason=_get(d, "paper_reason", (str, _NONE), where), explained=explained,
                   power_w=_get(d, "power_w", _NUM + (_NONE,), where, explained),
                   bound_by=_get(d, "bound_by", (str, _NONE), where, explained),
                   time_by_bound_s=_get(d, "time_by_bound_s", (dict, _NONE), where, explained),
                   glb_demand_Bps=_get(d, "glb_demand_Bps", _NUM + (_NONE,), where, explained),
                   at_best_hbm=None if at is None else AtHbm.from_dict(at, f"{where} at_best_hbm"))


def chip_rows(dicts, where: str = "store row") -> tuple[ChipRow, ...]:
    """Store rows (``Store.rows()``'s dicts, or stored explained rows) as ChipRows."""
    if not isinstance(dicts, list):
        raise StoreError(f"{where}s are {dicts!r:.60}, not a list; {_FIX}")
    return tuple(ChipRow.from_dict(d, where) for d in dicts)


def reference_rows(dicts, where: str = "stored reference") -> tuple[ReferenceRow, ...]:
    if not isinstance(dicts, list):
        raise StoreError(f"{where}s are {dicts!r:.60}, not a list; {_FIX}")
    return tuple(ReferenceRow.from_dict(d, where) for d in dicts)


@dataclass(frozen=True)
class SearchResult:
    """A co-search's answer: the best chip and its plans, the TPUv4-like comparison, the Pareto front, counts.
    ``spec`` stays the fingerprint dict (``SearchSpec.fingerprint()``): it is the stored format, and reports
    read it as such."""

    store: str
    spec: dict
    counts: dict  # candidates, exact, bounded, pruned, infeasible, schedules_solved, schedules_not_optimal, ...
    best: ChipRow | None
    references: tuple[ReferenceRow, ...]  # one per model
    pareto: tuple[ChipRow, ...]  # (area, score) front: exact with spec.pareto, else among exactly evaluated chips
    wall_time_s: float
    per_model: tuple[ChipRow, ...] = ()  # with several models: each model's own best chip (``model`` set)
    # {reference chip name: the steps from it to the winner} (``phaze.search.why``)
    wins_because: dict = field(default_factory=dict)
    # {"winner" or reference chip name: TCO parts} and {axis: front points} (``phaze.search.fronts``)
    tco: dict = field(default_factory=dict)
    fronts: dict = field(default_factory=dict)
    # the winner's and the reference's network (``ChipNetwork.to_dict``) when the space has a network axis
    network: dict | None = None
    reference_network: dict | None = None
    # the second reference, the real TPU v4 (``tpuv4`` preset), one per model; () for the paper's space
    real_references: tuple[ReferenceRow, ...] = ()

    def gains(self) -> list[dict]:
        """Per model, the winner's throughput over each reference's under its best plan: ``vs`` {reference chip
        name: ratio} at the reference's own HBM (32 GiB), and ``vs_equal_hbm`` the same with the reference given
        the winner's HBM capacity (``ReferenceRow.at_best_hbm``; equal to ``vs`` when the winner has 32 GiB; None
        when the reference fits no plan). HBM capacity lies outside the area budget and the search buys it for
        any chip, so the equal-HBM ratio is the gain of the chip's design alone (docs/chip-model.md)."""
        if self.best is None:
            return []
        out = []
        for k, o in enumerate(self.best.outcomes):
            vs, eq = {}, {}
            for refs in (self.references, self.real_references):
                if k >= len(refs):
                    continue
                r = refs[k]
                at = r.at_best_hbm
                same = at.best_seq_per_s if at is not None else (r.best_seq_per_s if r.hbm_gib == self.best.hbm_gib
                                                                 else None)
                vs[r.chip_name] = o.throughput_seq_per_s / r.best_seq_per_s if r.best_seq_per_s else None
                eq[r.chip_name] = o.throughput_seq_per_s / same if same else None
            out.append({"model": o.model, "hbm_gib": self.best.hbm_gib, "vs": vs, "vs_equal_hbm": eq})
        return out

    def to_dict(self) -> dict:
        return {"store": self.store, "spec": self.spec, "counts": self.counts,
                "best": None if self.best is None else self.best.to_dict(),
                "references": [r.to_dict() for r in self.references], "pareto": [r.to_dict() for r in self.pareto],
                "wall_time_s": self.wall_time_s, "per_model": [r.to_dict() for r in self.per_model],
                "wins_because": self.wins_because, "tco": self.tco, "fronts": self.fronts,
                "real_references": [r.to_dict() for r in self.real_references], "gains": self.gains(),
                "network": self.network, "reference_network": self.reference_network}

    @classmethod
    def from_dict(cls, d: dict, where: str = "search result") -> "SearchResult":
        d = _mapping(d, where)
        best = _get(d, "best", (dict, _NONE), where)
        return cls(_get(d, "store", (str,), where), _get(d, "spec", (dict,), where), _get(d, "counts", (dict,), where),
                   None if best is None else ChipRow.from_dict(best, f"{where} best"),
                   reference_rows(_get(d, "references", (list,), where), f"{where} reference"),
                   chip_rows(_get(d, "pareto", (list,), where), f"{where} Pareto row"),
                   _get(d, "wall_time_s", _NUM, where),
                   chip_rows(_get(d, "per_model", (list,), where, required=False) or [], f"{where} per-model row"),
                   *(_get(d, k, (dict,), where, required=False) or {} for k in ("wins_because", "tco", "fronts")),
                   real_references=reference_rows(_get(d, "real_references", (list,), where, required=False) or [],
                                                  f"{where} TPU v4 reference"),
                   **{k: _get(d, k, (dict, _NONE), where, required=False) for k in ("network", "reference_network")})


assert [f.name for f in fields(ChipRow)][:14] == list(_ROW_KINDS)  # to_dict writes the store's column order
