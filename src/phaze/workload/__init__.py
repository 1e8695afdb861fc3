"""What is trained: model configs (zoo + user files), per-layer operator graphs, per-layer memory."""
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PAPER_PLAN_SPACE, PAPER_RUNTIME, PlanSpace, Runtime, TrainSetting
from phaze.workload.graphs import block_forward_gemm_flops, layer_graph, layer_graphs
from phaze.workload.memory import LayerMemory, layer_memory, param_count
from phaze.workload.ops import Collective, Gemm, LayerGraph, VectorOp, op_resource
from phaze.workload.zoo import get_model, list_models, load_model_file

__all__ = [
    "ModelConfig", "TrainSetting", "Runtime", "PlanSpace", "PAPER_RUNTIME", "PAPER_PLAN_SPACE", "Gemm", "VectorOp", "Collective", "LayerGraph", "op_resource",
    "get_model", "list_models", "load_model_file", "layer_graph", "layer_graphs",
    "block_forward_gemm_flops", "LayerMemory", "layer_memory", "param_count",
]
