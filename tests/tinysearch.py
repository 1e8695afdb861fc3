"""The tiny model and design space the search, reproduce, report and CLI tests share: as objects, and as the
YAML files a user would write for them (``tests/test_tinysearch.py`` checks the two say the same)."""
from phaze.hardware.space import DesignSpace
from phaze.workload.config import ModelConfig

MiB = 2**20
TINY = ModelConfig(name="tiny", num_layers=4, hidden=256, heads=4, ffn=1024, vocab=2000, seq_len=128, max_tp=2)
# a network axis of two choices (the default's nine would make the brute-force searches of the tests 4.5x longer)
NETWORKS = dict(net_scale_up_chips=(16,), net_scale_up_Bps=(25e9, 50e9), net_topologies=("switch",),
                net_scale_out_Bps=(12.5e9,))
SPACE = DesignSpace(num_tc=(1, 4, 16), num_vc=(1, 4), tc_widths=(16, 64), tc_depths=(16, 64),
                    glb_bytes=(2 * MiB, 32 * MiB), **NETWORKS)

MODEL_YAML = """name: tiny
num_layers: 4
hidden: 256
heads: 4
ffn: 1024
vocab: 2000
seq_len: 128
max_tp: 2
"""
SPACE_YAML = """num_tc: [1, 4, 16]
num_vc: [1, 4]
tc_widths: [16, 64]
tc_depths: [16, 64]
glb_mib: [2, 32]
net_scale_up_chips: [16]
net_scale_up_Bps: [2.5e10, 5.0e10]
net_topologies: [switch]
net_scale_out_Bps: [1.25e10]
"""
