#!/usr/bin/env python3
"""Generate ``src/phaze/hardware/data/sram_cacti22nm.csv`` with CACTI 7 at 22 nm (the binary in ``zigzag-dse``).

Not run by the project or its tests: it needs the CACTI binary shipped inside the PyPI package ``zigzag-dse``,
installed in a scratch venv (never in the project venv):

    python3 -m venv ../scratch-zz && ../scratch-zz/bin/pip install zigzag-dse==3.9.1
    ../scratch-zz/bin/python scripts/make_sram_table.py [--jobs 2] [-o src/phaze/hardware/data/sram_cacti22nm.csv]

What a row means. A macro of ``capacity_bytes`` is ``banks`` independent banks of ``capacity_bytes / banks``
each; every bank has ``ports`` read-write ports of ``width_bytes`` (one access moves ``width_bytes``), so the
macro moves up to ``banks * ports * width_bytes`` per cycle. Each bank is one CACTI 7 run ("ram" type, UCA,
one bank, ``ports`` read-write ports, block = I/O width = ``width_bytes``, 22 nm itrs-hp cells and periphery,
360 K, ECC on, CACTI's ED^2 optimisation -- the settings zigzag-dse uses for its own memories, so energies are
consistent with the ZigZag panel). Then

    area_mm2       = banks * area(bank)            read/write_energy_j = energy of one bank access
    access_time_s  = access time of one bank       cycle_time_s        = random cycle time of one bank
    leakage_w      = banks * standby leakage of one bank

The wiring between banks and the cores is not in the macro (it is the on-chip network's cost).

Large macros need no special construction: CACTI itself splits one bank into mats and subarrays (its Ndwl,
Ndbl, Nspd organisation search), and every bank here up to 128 MiB is one direct CACTI run. Small banks are the
limit: CACTI finds no organisation for a bank shallower than 32 words (e.g. 8 KiB with a 512 B port, or 128 B
banks); such a bank is a register file, not an SRAM, and those combinations are absent from the table (the
reader refuses them with a one-line error).
"""
from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NODE_UM = 0.022
KiB, MiB = 2**10, 2**20
CAPACITIES = [2**i for i in range(10, 28)]  # 1 KiB .. 128 MiB
BANKS = [2**i for i in range(0, 7)]  # 1 .. 64
WIDTHS = [2**i for i in range(3, 10)]  # 8 .. 512 B
PORTS = [1, 2]
MIN_BANK_BYTES = 64  # CACTI's smallest array
OUT = Path(__file__).resolve().parents[1] / "src/phaze/hardware/data/sram_cacti22nm.csv"
COLUMNS = ["capacity_bytes", "banks", "width_bytes", "ports", "area_mm2", "read_energy_j", "write_energy_j",
           "access_time_s", "cycle_time_s", "leakage_w"]

# One CACTI 7 input file: a scratchpad RAM ("ram") of one UCA bank. The -dram/-io block at the end is
# required by CACTI's parser even for SRAM and does not affect the SRAM figures.
CONFIG = """\
-size (bytes) {size}
-block size (bytes) {width}
-output/input bus width {width_bits}
-associativity 1
-read-write port {ports}
-exclusive read port 0
-exclusive write port 0
-single ended read ports 0
-UCA bank count 1
-technology (u) {node}
-page size (bits) 8192
-burst length 8
-internal prefetch width 8
-Data array cell type - "itrs-hp"
-Data array peripheral type - "itrs-hp"
-Tag array cell type - "itrs-hp"
-Tag array peripheral type - "itrs-hp"
-operating temperature (K) 360
-cache type "ram"
-tag size (b) "default"
-access mode (normal, sequential, fast) - "normal"
-design objective (weight delay, dynamic power, leakage power, cycle time, area) 0:0:0:100:0
-deviate (delay, dynamic power, leakage power, cycle time, area) 20:100000:100000:100000:100000
-NUCAdesign objective (weight delay, dynamic power, leakage power, cycle time, area) 100:100:0:0:100
-NUCAdeviate (delay, dynamic power, leakage power, cycle time, area) 10:10000:10000:10000:10000
-Optimize ED or ED^2 (ED, ED^2, NONE): "ED^2"
-Cache model (NUCA, UCA)  - "UCA"
-NUCA bank count 0
-Wire signaling (fullswing, lowswing, default) - "Global_30"
-Wire inside mat - "semi-global"
-Wire outside mat - "semi-global"
-Interconnect projection - "conservative"
-Core count 8
-Cache level (L2/L3) - "L3"
-Add ECC - "true"
-Print level (DETAILED, CONCISE) - "CONCISE"
-Print input parameters - "false"
-Force cache config - "false"
-Ndwl 1
-Ndbl 1
-Nspd 0
-Ndcm 1
-Ndsam1 0
-Ndsam2 0
-dram_type "DDR3"
-io state "WRITE"
-addr_timing 1.0
-mem_density 4 Gb
-bus_freq 800 MHz
-duty_cycle 1.0
-activity_dq 1.0
-activity_ca 0.5
-num_dq 72
-num_dqs 18
-num_ca 25
-num_clk  2
-num_mem_dq 2
-mem_data_width 8
-rtt_value 10000
-ron_value 34
-tflight_value
-num_bobs 1
-capacity 80
-num_channels_per_bob 1
-first metric "Cost"
-second metric "Bandwidth"
-third metric "Energy"
-DIMM model "ALL"
-mirror_in_bob "F"
"""


def find_cacti(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    try:
        import zigzag  # noqa: F401  (only to locate the binary it ships)
    except ImportError:
        sys.exit("make_sram_table: zigzag-dse is not installed in this interpreter; run it with the scratch "
                 "venv's python (see the module docstring) or pass --cacti DIR")
    return Path(zigzag.__file__).parent / "cacti" / "cacti_master"


def zigzag_version() -> str:
    try:
        from importlib.metadata import version
        return version("zigzag-dse")
    except Exception:
        return "unknown"


class Cacti:
    """Runs the CACTI binary in private copies of its directory (it wants relative input paths)."""

    def __init__(self, master: Path, work: Path):
        self.master, self.work = master, work
        self.cache: dict[tuple[int, int, int], dict | None] = {}

    def _dir(self) -> Path:
        d = self.work / f"w{os.getpid()}_{threading_id()}"
        if not d.exists():
            d.mkdir(parents=True)
            shutil.copy2(self.master / "cacti", d / "cacti")
            shutil.copytree(self.master / "tech_params", d / "tech_params")
        return d

    def run(self, size: int, width: int, ports: int) -> dict | None:
        """One CACTI bank: dict of its figures (SI), or None when CACTI finds no organisation."""
        key = (size, width, ports)
        if key in self.cache:
            return self.cache[key]
        d = self._dir()
        cfg = d / "in.cfg"
        out = d / "in.cfg.out"
        cfg.write_text(CONFIG.format(size=size, width=width, width_bits=8 * width, ports=ports, node=NODE_UM))
        out.unlink(missing_ok=True)
        res = None
        try:
            subprocess.run(["./cacti", "-infile", "in.cfg"], cwd=d, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=300, check=False)
        except subprocess.TimeoutExpired:
            pass
        if out.exists():
            lines = out.read_text().strip().splitlines()
            if len(lines) >= 2:
                head = [h.strip() for h in lines[0].split(",")]
                vals = [v.strip() for v in lines[1].split(",")]
                row = dict(zip(head, vals))
                try:
                    res = {"area_mm2": float(row["Area (mm2)"]),
                           "read_energy_j": float(row["Dynamic read energy (nJ)"]) * 1e-9,
                           "write_energy_j": float(row["Dynamic write energy (nJ)"]) * 1e-9,
                           "access_time_s": float(row["Access time (ns)"]) * 1e-9,
                           "cycle_time_s": float(row["Random cycle time (ns)"]) * 1e-9,
                           "leakage_w": float(row["Standby leakage per bank(mW)"]) * 1e-3}
                    assert int(float(row["Capacity (bytes)"])) == size
                except (KeyError, ValueError):
                    res = None
        self.cache[key] = res
        return res


def threading_id() -> int:
    import threading
    return threading.get_ident()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cacti", help="CACTI directory (default: the one inside the installed zigzag-dse)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-o", "--output", default=str(OUT))
    args = ap.parse_args()
    master = find_cacti(args.cacti)
    if not (master / "cacti").exists():
        sys.exit(f"make_sram_table: no CACTI binary at {master}/cacti")
    version_h = (master / "version_cacti.h").read_text() if (master / "version_cacti.h").exists() else ""
    ver = "7.0" if "VER_MAJOR_CACTI 7" in version_h and "VER_MINOR_CACTI 0" in version_h else "unknown"

    # every distinct bank once (the macro rows share banks), in parallel
    banks_needed = sorted({(c // b, w, p) for c, b, w, p in itertools.product(CAPACITIES, BANKS, WIDTHS, PORTS)
                           if c // b >= MIN_BANK_BYTES}, key=lambda k: -k[0])
    with tempfile.TemporaryDirectory(prefix="cacti_") as tmp:
        cacti = Cacti(master, Path(tmp))
        with ThreadPoolExecutor(args.jobs) as ex:
            built = dict(zip(banks_needed, ex.map(lambda k: cacti.run(*k), banks_needed)))
    rows, missing = [], 0
    for c, b, w, p in itertools.product(CAPACITIES, BANKS, WIDTHS, PORTS):
        r = built.get((c // b, w, p))
        if r is None:
            missing += 1
            continue
        rows.append([c, b, w, p, f"{b * r['area_mm2']:.6g}", f"{r['read_energy_j']:.6g}",
                     f"{r['write_energy_j']:.6g}", f"{r['access_time_s']:.6g}", f"{r['cycle_time_s']:.6g}",
                     f"{b * r['leakage_w']:.6g}"])
    out = Path(args.output)
    header = [
        f"# SRAM macros at 22 nm from CACTI {ver} (HP Labs; the binary shipped in zigzag-dse {zigzag_version()},"
        " version_cacti.h '3DD Prerelease')",
        "# generated by: python scripts/make_sram_table.py  (see its docstring for the CACTI settings and how a row"
        " is built)",
        "# a row: `banks` banks of capacity/banks bytes, each with `ports` read-write ports of `width_bytes`;"
        " area and leakage of all banks, energy/time of one bank access;",
        "# extra columns: cycle_time_s = random cycle time of one bank, leakage_w = standby leakage of all banks;"
        " combinations CACTI cannot build (banks under 32 words deep) are absent",
        f"# {len(rows)} rows; {missing} combinations absent",
    ]
    out.write_text("\n".join(header) + "\n" + ",".join(COLUMNS) + "\n"
                   + "".join(",".join(map(str, r)) + "\n" for r in rows))
    print(f"wrote {out}: {len(rows)} rows, {missing} absent, {len(banks_needed)} distinct banks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
