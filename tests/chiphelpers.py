"""A one-line chip with the on-chip hierarchy for the cost and energy tests."""
from phaze.hardware import Accelerator

MiB = 2**20


def small_chip(num_tc=1, rows=128, cols=128, num_vc=1, lanes=128, glb=128 * MiB, banks=64, width=512, operand=None,
               acc=None, noc="crossbar", link=None, hbm_bw=1e15, **kw):
    """num_tc tensor cores of rows x cols with (default) a two-tile operand buffer and 1024 accumulator rows,
    a GLB of banks x width B on a crossbar, 32 GiB HBM at hbm_bw, 1 GHz."""
    return Accelerator("t", num_tc, rows, cols, num_vc, lanes, glb, 32 * 2**30, hbm_bw, 1e9,
                       glb_banks=banks, glb_bank_width_bytes=width,
                       tc_operand_bytes=2 * rows * cols * 2 if operand is None else operand,
                       tc_acc_bytes=1024 * cols * 4 if acc is None else acc, noc=noc,
                       noc_link_bytes=width if link is None else link, **kw)
