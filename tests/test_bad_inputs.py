"""The bad-input panel: every hostile or careless input tried against the subcommands ends in one line on
stderr, exit status 2, no traceback, within seconds, and writes nothing (the working directory and the input
files are unchanged). Cases: the issue-15 panel's failures (alias bombs, huge integers, deep nesting, binary
files, infinite times, unwritable outputs, non-phaze stores) and its passing ones (unknown names, zero and
negative sizes, broken files, truncated stores)."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from phaze.search.store import Store

PHAZE = str(Path(sys.executable).parent / "phaze")  # the installed command
HUGE = "1" + "0" * 30  # 10^30
BOMB = "".join([
    'a: &a ["x","x","x","x","x","x","x","x","x"]\n',
    *(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")),
    "num_layers: *i\n",
])
MODEL = dict(num_layers=2, hidden=64, heads=4, ffn=256, vocab=100, seq_len=16)
CHIP = dict(num_tc=8, tc_rows=128, tc_cols=128, num_vc=2, vc_width=128, glb_bytes=2**27, hbm_bytes=2**35,
            hbm_bandwidth_Bps=1.2e12, freq_hz=1.0e9)


def _yaml(d: dict) -> str:
    return "".join(f"{k}: {v}\n" for k, v in d.items())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    (d / "bomb.yaml").write_text(BOMB)
    (d / "anchor.yaml").write_text(_yaml(MODEL).replace("hidden: 64", "hidden: &h 64") + "ffn2: *h\n")
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "deep.yaml").write_text("a:\n" + "".join(" " * (i + 1) + "a:\n" for i in range(3000)) + " " * 3001 + "1\n")
    (d / "deep65.json").write_text("[" * 65 + "]" * 65)
    (d / "bin.yaml").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    (d / "bin.json").write_bytes(b"\x00" * 100)
    (d / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    with open(d / "huge.yaml", "wb") as f:  # sparse: 65 MiB on paper, nothing on disk
        f.truncate(65 * 2**20)
    (d / "empty.yaml").write_text("")
    (d / "list.yaml").write_text("- 1\n- 2\n")
    (d / "dir.yaml").mkdir()
    (d / "syntax.yaml").write_text("num_layers: [1\n")
    (d / "syntax.json").write_text("{")
    (d / "m_hugeint.yaml").write_text(_yaml(dict(MODEL, num_layers=HUGE)))
    (d / "m_hugehidden.yaml").write_text(_yaml(dict(MODEL, hidden=HUGE)))
    (d / "m_floathidden.yaml").write_text(_yaml(dict(MODEL, hidden="1.0e30")))
    (d / "m_zero.yaml").write_text(_yaml(dict(MODEL, num_layers=0)))
    (d / "m_neg.yaml").write_text(_yaml(dict(MODEL, hidden=-64)))
    (d / "m_digits.json").write_text(json.dumps(MODEL).replace('"num_layers": 2', '"num_layers": ' + "9" * 5000))
    (d / "m_vocab.json").write_text(json.dumps(dict(MODEL, vocab=2**40)))
    (d / "c_inf.yaml").write_text(_yaml(dict(CHIP, freq_hz=".inf")))
    (d / "c_nan.yaml").write_text(_yaml(dict(CHIP, hbm_bandwidth_Bps=".nan")))
    (d / "c_hugeint.yaml").write_text(_yaml(dict(CHIP, num_tc=HUGE)))
    (d / "c_zero.yaml").write_text(_yaml(dict(CHIP, num_tc=0)))
    (d / "c_eff.yaml").write_text(_yaml(dict(CHIP, matrix_efficiency=5)))
    cluster = ("tiers:\n  - {name: nv, devices_per_group: 8, bandwidth_Bps: 4.5e11, latency_s: 3.0e-6}\n"
               "  - {name: ib, bandwidth_Bps: 5.0e10, latency_s: 5.0e-6}\n")
    (d / "k_inf.yaml").write_text(cluster.replace("5.0e10", ".inf"))
    (d / "k_huge.yaml").write_text(cluster.replace("devices_per_group: 8", f"devices_per_group: {HUGE}"))
    (d / "k_devices.yaml").write_text(f"devices: {HUGE}\n" + cluster)
    (d / "s_hugeaxis.yaml").write_text("num_tc: {min: 1, max: " + HUGE + "}\n")
    (d / "s_toomany.yaml").write_text(f"num_tc: {list(range(1, 2001))}\n")  # 2000 x 13 x 8 x 8 x 7 = 11.6M chips
    (d / "s_zero.yaml").write_text("num_tc: [0, 1]\n")
    (d / "s_budget.yaml").write_text("budget_mm2: .nan\n")
    (d / "hfok.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                             "hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 4,
                                             "num_hidden_layers": 2, "vocab_size": 100,
                                             "max_position_embeddings": 16}))
    (d / "cfg.json").write_text((d / "hfok.json").read_text().replace('"hidden_size": 64', f'"hidden_size": {HUGE}'))
    moe = dict(MODEL, norm="rmsnorm", mlp="swiglu", position="rotary", bias="false", num_experts=8,
               experts_per_token=2, moe_ffn=64)
    (d / "moe.yaml").write_text(_yaml(moe))
    mixtral = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_size": 64,
               "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
               "vocab_size": 100, "max_position_embeddings": 64, "num_local_experts": 4}
    (d / "hf_topk.json").write_text(json.dumps(dict(mixtral, num_experts_per_tok=5)))
    (d / "hf_noexperts.json").write_text(json.dumps(dict(mixtral, num_local_experts=0, num_experts_per_tok=1)))
    (d / "notphaze.db").write_bytes(b"")
    con = sqlite3.connect(d / "notphaze.db")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    (d / "junk.db").write_bytes(b"this is not a database " * 100)
    s = Store.open(d / "full.db", {"models": []}, False)  # a phaze store, several pages long
    s.put_meta("filler", ["x" * 1000] * 40)
    s.close()
    Store.open(d / "reproduce.db", {"rows": 2}, True, namespace="reproduce").close()  # what `phaze reproduce` opens
    whole = (d / "full.db").read_bytes()
    (d / "truncated.db").write_bytes(whole[: len(whole) // 3])
    (d / "afile").write_text("x")
    return d


def _snapshot(*dirs: Path) -> dict:
    out = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            st = p.lstat()
            out[str(p)] = (st.st_size, st.st_mtime_ns, p.is_dir())
    return out


M, A = ("--model", "gpt2-xl"), ("--accelerator", "a100-80g")
PLAN = ("plan", *M, *A, "--devices", "8", "--global-batch", "16")
EVAL = ("evaluate", *M, *A, "--devices", "8", "--global-batch", "16", "--tp", "1", "--pp", "2", "--dp", "4",
        "--mbs", "1")
SEARCH = ("search", *M)
EST = ("estimate", *M, *A)
SCHED = ("schedule", *M, *A, "--layer", "embedding")

MOE = ("--model", "{in}/moe.yaml", "--accelerator", "h100-80g")
MOE_PLAN = ("plan", *MOE, "--devices", "8", "--global-batch", "16")
MOE_EVAL = ("evaluate", *MOE, "--devices", "8", "--global-batch", "16", "--tp", "1", "--pp", "1", "--dp", "8",
            "--mbs", "1")

# (case id, argv with {in} for the inputs folder, a piece of the expected message)
CASES = [
    # --- Mixture-of-Experts inputs (issue 33) ---
    ("moe-eval-ep-not-dividing-experts", (*MOE_EVAL, "--ep", "3"), "must divide the 8 experts"),
    ("moe-eval-ep-not-dividing-group", (*MOE_EVAL[:-8], "--tp", "1", "--pp", "1", "--dp", "6", "--mbs", "1", "--ep",
                                        "4"), "must divide tp x cp x dp = 6"),
    ("moe-eval-ep-etp-above-group", (*MOE_EVAL[:-8], "--tp", "1", "--pp", "2", "--dp", "4", "--mbs", "1", "--ep",
                                     "4", "--etp", "2"), "larger than the tp x cp x dp = 4"),
    ("moe-eval-etp-not-dividing-ffn", (*MOE_EVAL, "--etp", "3"), "--etp 3 must divide"),
    ("moe-eval-ep-zero", (*MOE_EVAL, "--ep", "0"), "--ep"),
    ("moe-eval-ep-huge", (*MOE_EVAL, "--ep", HUGE), "--ep"),
    ("moe-plan-ep-not-dividing-experts", (*MOE_PLAN, "--ep", "1,16"), "--ep 16 must divide the 8 experts"),
    ("moe-plan-ep-not-dividing-devices", ("plan", *MOE, "--devices", "12", "--global-batch", "12", "--ep", "8"),
     "must divide the 12 devices"),
    ("moe-plan-ep-etp-above-devices", (*MOE_PLAN, "--ep", "8", "--etp", "2"), "larger than the 8 devices"),
    ("moe-plan-etp-not-dividing-ffn", (*MOE_PLAN, "--etp", "1,3"), "--etp 3 must divide"),
    ("moe-plan-ep-zero", (*MOE_PLAN, "--ep", "0"), "positive"),
    ("moe-capacity-zero", (*MOE_EVAL, "--moe-routing", "capacity:0"), "F > 0"),
    ("moe-capacity-negative", (*MOE_PLAN, "--moe-routing", "capacity:-1.5"), "F > 0"),
    ("moe-capacity-not-a-number", (*MOE_EVAL, "--moe-routing", "capacity:lots"), "F > 0"),
    ("moe-capacity-nan", (*MOE_EVAL, "--moe-routing", "capacity:nan"), "F > 0"),
    ("moe-routing-unknown", (*MOE_PLAN, "--moe-routing", "greedy"), "--moe-routing"),
    ("moe-dispatcher-unknown", (*MOE_PLAN, "--moe-dispatcher", "nccl"), "invalid choice"),
    ("dense-moe-routing", (*EVAL, "--moe-routing", "balanced"), "gpt2-xl is a dense model (no experts); drop --moe-routing"),
    ("dense-moe-dispatcher", (*PLAN, "--moe-dispatcher", "deepep"), "drop --moe-dispatcher"),
    ("dense-moe-a2a-overlap", (*PLAN, "--moe-a2a-overlap"), "drop --moe-a2a-overlap"),
    ("dense-ep", (*EVAL, "--ep", "2"), "is a dense model (no experts); drop --ep"),
    ("dense-etp-plan", (*PLAN, "--etp", "1,2"), "drop --etp"),
    ("hf-topk-above-experts", ("show-model", "hf:{in}/hf_topk.json"), "'num_experts_per_tok' = 5"),
    ("hf-topk-above-experts-plan", ("plan", "--model", "hf:{in}/hf_topk.json", *A, "--devices", "8",
                                    "--global-batch", "8"), "num_experts_per_tok"),
    ("hf-no-experts", ("import-model", "{in}/hf_noexperts.json"), "'num_local_experts' = 0"),
    ("search-seq-zero", (*SEARCH, "--seq", "0"), "--seq"),
    ("search-seq-above-learned-positions", (*SEARCH, "--seq", "4096"), "learned positions"),
    # --- hangs in the panel: alias bombs and huge device/batch counts ---
    ("bomb-model", ("show-model", "{in}/bomb.yaml"), "aliases"),
    ("bomb-chip", (*EST[:3], "--accelerator", "{in}/bomb.yaml"), "aliases"),
    ("bomb-space-arch", ("arch", "--space", "{in}/bomb.yaml"), "aliases"),
    ("bomb-space-search", (*SEARCH, "--space", "{in}/bomb.yaml"), "aliases"),
    ("anchor-model", ("show-model", "{in}/anchor.yaml"), "anchors"),
    ("plan-devices-huge", ("plan", *M, *A, "--devices", HUGE, "--global-batch", "16"), "--devices"),
    ("plan-batch-huge", ("plan", *M, *A, "--devices", "8", "--global-batch", HUGE), "--global-batch"),
    ("search-devices-huge", (*SEARCH, "--devices", HUGE), "--devices"),
    ("search-batch-huge", (*SEARCH, "--global-batch", HUGE), "--global-batch"),
    ("evaluate-devices-huge", ("evaluate", *M, *A, "--devices", HUGE, "--global-batch", "16", "--tp", "1", "--pp",
                               "1", "--dp", "1", "--mbs", "1"), "--devices"),
    # --- tracebacks in the panel: huge integers in flags and files ---
    ("estimate-seq-huge", (*EST, "--seq", HUGE), "--seq"),
    ("estimate-mbs-huge", (*EST, "--mbs", HUGE), "--mbs"),
    ("estimate-tp-huge", (*EST, "--tp", HUGE), "--tp"),
    ("schedule-mbs-huge", (*SCHED, "--mbs", HUGE), "--mbs"),
    ("show-model-seq-huge", ("show-model", "gpt2-xl", "--seq", HUGE), "--seq"),
    ("search-hbm-huge", (*SEARCH, "--hbm-gib", HUGE), "--hbm-gib"),
    ("search-budget-huge", (*SEARCH, "--budget-mm2", "1e30"), "--budget-mm2"),
    ("search-mbs-huge", (*SEARCH, "--mbs", HUGE), "--mbs"),
    ("search-tp-huge", (*SEARCH, "--tp", HUGE), "--tp"),
    ("search-workers-huge", (*SEARCH, "--workers", HUGE), "--workers"),
    ("plan-mbs-huge", (*PLAN, "--mbs", HUGE), "--mbs"),
    ("plan-seq-huge", (*PLAN, "--seq", HUGE), "--seq"),
    ("plan-top-huge", (*PLAN, "--top", HUGE), "--top"),
    ("evaluate-pp-huge", (*EVAL[:-8], "--tp", "1", "--pp", HUGE, "--dp", "1", "--mbs", "1"), "--pp"),
    ("evaluate-interleave-huge", (*EVAL, "--interleave", HUGE), "--interleave"),
    ("arch-budget-huge", ("arch", "--budget-mm2", "1e30"), "--budget-mm2"),
    ("import-mbs-huge", ("import-model", "{in}/cfg.json", "--mbs", HUGE), "--mbs"),
    ("model-num-layers-huge", ("show-model", "{in}/m_hugeint.yaml"), "num_layers"),
    ("model-hidden-huge", ("show-model", "{in}/m_hugehidden.yaml"), "hidden"),
    ("model-hidden-1e30", ("show-model", "{in}/m_floathidden.yaml"), "hidden"),
    ("model-5000-digits", ("show-model", "{in}/m_digits.json"), "digits"),
    ("model-vocab-2^40", ("show-model", "{in}/m_vocab.json"), "vocab"),
    ("model-huge-in-plan", ("plan", "--model", "{in}/m_hugeint.yaml", *A, "--devices", "8", "--global-batch", "8"),
     "num_layers"),
    ("hf-hidden-huge", ("show-model", "hf:{in}/cfg.json"), "hidden"),
    ("chip-num-tc-huge", (*EST[:3], "--accelerator", "{in}/c_hugeint.yaml"), "num_tc"),
    ("chip-freq-inf", (*EST[:3], "--accelerator", "{in}/c_inf.yaml"), "freq_hz"),
    ("chip-bandwidth-nan", (*EST[:3], "--accelerator", "{in}/c_nan.yaml"), "hbm_bandwidth_Bps"),
    ("chip-efficiency-5", (*EST[:3], "--accelerator", "{in}/c_eff.yaml"), "matrix_efficiency"),
    ("space-axis-huge", ("arch", "--space", "{in}/s_hugeaxis.yaml"), "num_tc"),
    ("space-too-many-points", ("arch", "--space", "{in}/s_toomany.yaml"), "split the space"),
    ("space-budget-nan", ("arch", "--space", "{in}/s_budget.yaml"), "budget_mm2"),
    ("cluster-bandwidth-inf", (*PLAN, "--cluster", "{in}/k_inf.yaml"), "bandwidth_Bps"),
    ("cluster-group-huge", (*PLAN, "--cluster", "{in}/k_huge.yaml"), "devices_per_group"),
    ("cluster-devices-huge", (*PLAN, "--cluster", "{in}/k_devices.yaml"), "devices"),
    ("cluster-bomb", (*PLAN, "--cluster", "{in}/bomb.yaml"), "aliases"),
    ("cluster-binary", (*PLAN, "--cluster", "{in}/bin.yaml"), "binary"),
    ("cluster-deep", (*PLAN, "--cluster", "{in}/deep.yaml"), "nested too deeply"),
    # --- deep nesting and binary files ---
    ("deep-json-model", ("show-model", "{in}/deep.json"), "nested too deeply"),
    ("deep65-json-model", ("show-model", "{in}/deep65.json"), "nested too deeply"),
    ("deep-yaml-model", ("show-model", "{in}/deep.yaml"), "nested too deeply"),
    ("deep-json-chip", (*EST[:3], "--accelerator", "{in}/deep.json"), "nested too deeply"),
    ("deep-yaml-space", ("arch", "--space", "{in}/deep.yaml"), "nested too deeply"),
    ("deep-json-cases", ("validate", "--cases", "{in}/deep.json"), "nested too deeply"),
    ("deep-json-reproduce", ("report", "--reproduce", "{in}/deep.json"), "nested too deeply"),
    ("deep-json-import", ("import-model", "{in}/deep.json"), "nested too deeply"),
    ("binary-chip", (*EST[:3], "--accelerator", "{in}/bin.yaml"), "binary"),
    ("binary-space", ("arch", "--space", "{in}/bin.yaml"), "binary"),
    ("binary-space-search", (*SEARCH, "--space", "{in}/bin.yaml"), "binary"),
    ("binary-model", ("show-model", "{in}/bin.yaml"), "binary"),
    ("binary-json-model", ("show-model", "{in}/bin.json"), "binary"),
    ("binary-cases", ("validate", "--cases", "{in}/bin.json"), "binary"),
    ("binary-reproduce", ("report", "--reproduce", "{in}/bin.json"), "binary"),
    ("binary-hf", ("show-model", "hf:{in}/bin.json"), "binary"),
    ("binary-import", ("import-model", "{in}/bin.json"), "binary"),
    ("latin1-model", ("show-model", "{in}/latin1.yaml"), "UTF-8"),
    ("huge-file-model", ("show-model", "{in}/huge.yaml"), "MiB"),
    ("huge-file-chip", (*EST[:3], "--accelerator", "{in}/huge.yaml"), "MiB"),
    # --- infinite and non-positive times ---
    ("schedule-time-inf", (*SCHED, "--time-limit", "inf"), "--time-limit"),
    ("schedule-time-nan", (*SCHED, "--time-limit", "nan"), "--time-limit"),
    ("schedule-time-zero", (*SCHED, "--time-limit", "0"), "--time-limit"),
    ("schedule-time-negative", (*SCHED, "--time-limit", "-1"), "--time-limit"),
    ("schedule-time-huge", (*SCHED, "--time-limit", "1e30"), "--time-limit"),
    # --- unwritable outputs ---
    ("search-plot-readonly", (*SEARCH, "--plot", "/proc/phaze-plots"), "not writable"),
    ("search-plot-is-a-file", (*SEARCH, "--plot", "{in}/afile/sub"), "not a directory"),
    ("search-html-no-dir", (*SEARCH, "--html", "{in}/nowhere/r.html"), "does not exist"),
    ("search-html-readonly", (*SEARCH, "--html", "/proc/r.html"), "not writable"),
    ("plan-html-not-html", (*PLAN, "--html", "r.txt"), ".html"),
    ("schedule-gantt-no-dir", (*SCHED, "--gantt", "{in}/nowhere/g.txt"), "does not exist"),
    ("schedule-gantt-bad-suffix", (*SCHED, "--gantt", "g.pdf"), ".png"),
    ("import-output-no-dir", ("import-model", "{in}/hfok.json", "-o", "{in}/nowhere/m.yaml"), "nowhere"),
    # --- stores ---
    ("resume-not-phaze", (*SEARCH, "--resume", "--store", "{in}/notphaze.db"), "not a phaze search store"),
    ("resume-junk", (*SEARCH, "--resume", "--store", "{in}/junk.db"), "not a phaze search store"),
    ("resume-truncated", (*SEARCH, "--resume", "--store", "{in}/truncated.db"), "store"),
    ("search-store-exists", (*SEARCH, "--store", "{in}/full.db"), "already exists"),
    ("resume-other-parameters", (*SEARCH, "--resume", "--store", "{in}/full.db"), "other parameters"),
    ("resume-reproduce-store", (*SEARCH, "--resume", "--store", "{in}/reproduce.db"),
     "holds a `phaze reproduce` run, not a `phaze search` one"),
    ("results-missing", ("results", "show", "--store", "{in}/none.db"), "no store"),
    ("results-junk", ("results", "show", "--store", "{in}/junk.db"), "store"),
    ("results-not-phaze", ("results", "export", "--store", "{in}/notphaze.db"), "store"),
    ("results-truncated", ("results", "show", "--store", "{in}/truncated.db"), "store"),
    ("results-top-zero", ("results", "show", "--store", "{in}/full.db", "--top", "0"), "--top"),
    ("report-store-junk", ("report", "--store", "{in}/junk.db", "--html", "r.html"), "store"),
    ("report-store-truncated", ("report", "--store", "{in}/truncated.db", "--html", "r.html"), "store"),
    # --- unknown names ---
    ("unknown-model", ("show-model", "gpt5-huge"), "gpt5-huge"),
    ("unknown-accelerator", (*EST[:3], "--accelerator", "tpu9"), "tpu9"),
    ("unknown-cluster-plan", (*PLAN, "--cluster", "nope"), "nope"),
    ("unknown-cluster-search", (*SEARCH, "--cluster", "nope"), "nope"),
    ("unknown-recompute", (*PLAN, "--recompute", "some"), "some"),
    ("unknown-subcommand", ("frobnicate",), "invalid choice"),
    ("unknown-layer", (*SCHED[:-2], "--layer", "mlp"), "invalid choice"),
    ("unknown-torch-module", ("show-model", "torch:phaze_no_such_module:make"), "phaze_no_such_module"),
    ("missing-model-file", ("show-model", "{in}/none.yaml"), "does not exist"),
    ("missing-space-file", ("arch", "--space", "{in}/none.yaml"), "does not exist"),
    ("missing-chip-file", (*EST[:3], "--accelerator", "{in}/none.yaml"), "does not exist"),
    ("missing-cases", ("validate", "--cases", "{in}/none.json"), "does not exist"),
    ("missing-reproduce", ("report", "--reproduce", "{in}/none.json"), "does not exist"),
    ("missing-hf", ("show-model", "hf:{in}/none.json"), "does not exist"),
    ("directory-as-model", ("show-model", "{in}/dir.yaml"), "not a regular file"),
    # --- zero and negative sizes ---
    ("plan-devices-zero", ("plan", *M, *A, "--devices", "0", "--global-batch", "16"), "--devices"),
    ("plan-devices-negative", ("plan", *M, *A, "--devices", "-8", "--global-batch", "16"), "--devices"),
    ("plan-batch-zero", ("plan", *M, *A, "--devices", "8", "--global-batch", "0"), "--global-batch"),
    ("plan-top-zero", (*PLAN, "--top", "0"), "--top"),
    ("plan-mbs-zero", (*PLAN, "--mbs", "0"), "positive"),
    ("evaluate-pp-zero", (*EVAL[:-8], "--tp", "1", "--pp", "0", "--dp", "1", "--mbs", "1"), "--pp"),
    ("evaluate-dp-negative", (*EVAL[:-8], "--tp", "1", "--pp", "1", "--dp", "-1", "--mbs", "1"), "--dp"),
    ("evaluate-interleave-zero", (*EVAL, "--interleave", "0"), "--interleave"),
    ("estimate-tp-zero", (*EST, "--tp", "0"), "--tp"),
    ("estimate-mbs-negative", (*EST, "--mbs", "-1"), "--mbs"),
    ("show-model-seq-zero", ("show-model", "gpt2-xl", "--seq", "0"), "--seq"),
    ("search-workers-zero", (*SEARCH, "--workers", "0"), "--workers"),
    ("search-devices-zero", (*SEARCH, "--devices", "0"), "--devices"),
    ("search-hbm-zero", (*SEARCH, "--hbm-gib", "0"), "positive"),
    ("search-budget-zero", (*SEARCH, "--budget-mm2", "0"), "--budget-mm2"),
    ("search-budget-nan", (*SEARCH, "--budget-mm2", "nan"), "--budget-mm2"),
    ("arch-budget-negative", ("arch", "--budget-mm2", "-5"), "--budget-mm2"),
    ("arch-budget-inf", ("arch", "--budget-mm2", "inf"), "--budget-mm2"),
    ("model-num-layers-zero", ("show-model", "{in}/m_zero.yaml"), "num_layers"),
    ("model-hidden-negative", ("show-model", "{in}/m_neg.yaml"), "hidden"),
    ("chip-num-tc-zero", (*EST[:3], "--accelerator", "{in}/c_zero.yaml"), "num_tc"),
    ("space-axis-zero", ("arch", "--space", "{in}/s_zero.yaml"), "num_tc"),
    ("search-tp-invalid", (*SEARCH, "--tp", "3"), "tp"),
    # --- broken files ---
    ("empty-model", ("show-model", "{in}/empty.yaml"), "mapping"),
    ("list-model", ("show-model", "{in}/list.yaml"), "mapping"),
    ("syntax-yaml-model", ("show-model", "{in}/syntax.yaml"), "does not parse"),
    ("syntax-json-model", ("show-model", "{in}/syntax.json"), "does not parse as JSON"),
    ("syntax-json-chip", (*EST[:3], "--accelerator", "{in}/syntax.json"), "does not parse"),
    ("syntax-yaml-space", ("arch", "--space", "{in}/syntax.yaml"), "does not parse"),
    ("syntax-json-cases", ("validate", "--cases", "{in}/syntax.json"), "does not parse as JSON"),
    ("list-space", ("arch", "--space", "{in}/list.yaml"), "mapping"),
    ("list-chip", (*EST[:3], "--accelerator", "{in}/list.yaml"), "mapping"),
]


@pytest.fixture
def no_hang():
    """Fail a case that runs over 20 s (the panel's hangs) instead of hanging the suite."""
    def on_alarm(signum, frame):
        raise TimeoutError("a bad input ran for over 20 s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_the_panel_is_large():
    assert len(CASES) >= 100 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case, argv, expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, argv, expected, inputs, tmp_path, monkeypatch,
                                                         capsys, cli, no_hang):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _snapshot(work, inputs)
    argv = [a.replace("{in}", str(inputs)) for a in argv]
    code, out, err = cli(*argv)
    lines = err.strip().splitlines()
    assert code == 2, (out, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err and "error" in lines[0]
    assert expected in lines[0], lines[0]
    assert _snapshot(work, inputs) == before, "a refused command wrote or changed a file"


@pytest.mark.parametrize("argv", [
    ("show-model", "{in}/bomb.yaml"),
    ("plan", "--model", "gpt2-xl", "--accelerator", "a100-80g", "--devices", HUGE, "--global-batch", "8"),
    ("schedule", "--model", "gpt2-xl", "--accelerator", "a100-80g", "--time-limit", "inf"),
    ("show-model", "{in}/deep.json"),
], ids=["bomb", "devices", "time-limit", "deep"])
def test_the_installed_command_refuses_in_one_line(argv, inputs, tmp_path):
    """The same through the real entry point in a fresh process (what a shell user sees)."""
    argv = [a.replace("{in}", str(inputs)) for a in argv]
    r = subprocess.run([PHAZE, *argv], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("phaze: error:"), r.stderr
    assert os.listdir(tmp_path) == []


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    """`phaze models | head -1` with the reader gone before we write: no BrokenPipeError, exit 141 (128+SIGPIPE)."""
    for argv in (["models"], ["models", "--json"]):
        p = subprocess.Popen([PHAZE, *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=tmp_path)
        p.stdout.close()
        err = p.stderr.read()
        p.stderr.close()
        assert p.wait(timeout=60) == 141
        assert err == b"", err


REPRODUCE_CASES = [
    ("spotlight-seed-huge", ("search", "--model", "gpt2-xl", "--baseline", "spotlight", "--seed", HUGE), "--seed"),
    ("spotlight-seed-2^32", ("search", "--model", "gpt2-xl", "--baseline", "spotlight", "--seed", str(2**32)),
     "--seed"),
    ("spotlight-samples-zero", ("search", "--model", "gpt2-xl", "--baseline", "spotlight", "--samples", "0"),
     "--samples"),
    ("reproduce-samples-huge", ("reproduce", "--models", "gpt2-xl", "--samples", HUGE), "--samples"),
    ("reproduce-workers-zero", ("reproduce", "--models", "gpt2-xl", "--workers", "0"), "--workers"),
    ("reproduce-unknown-model", ("reproduce", "--models", "gpt9"), "gpt9"),
    ("reproduce-seq-zero", ("reproduce", "--models", "gpt2-xl", "--seq", "0"), "--seq"),
    ("reproduce-seq-above-learned-positions", ("reproduce", "--models", "gpt2-xl", "--seq", "4096"),
     "learned positions"),
    ("reproduce-resume-junk", ("reproduce", "--models", "gpt2-xl", "--resume", "--store", "{in}/junk.db"), "store"),
    ("reproduce-resume-search-store", ("reproduce", "--models", "gpt2-xl", "--resume", "--store", "{in}/full.db"),
     "holds a `phaze search` run, not a `phaze reproduce` one"),
]


@pytest.mark.parametrize("case, argv, expected", REPRODUCE_CASES, ids=[c[0] for c in REPRODUCE_CASES])
def test_reproduce_and_spotlight_bad_input(case, argv, expected, inputs, tmp_path, monkeypatch, capsys, cli,
                                          no_hang):
    test_bad_input_is_one_line_exit_2_and_writes_nothing(case, argv, expected, inputs, tmp_path, monkeypatch,
                                                         capsys, cli, no_hang)
