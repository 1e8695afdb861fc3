"""What the workload runs on: one chip (Accelerator), its area and SRAM macros, the design space, clusters, presets."""
from phaze.hardware.accelerator import Accelerator, ArchArrays
from phaze.hardware.area import AreaModel, area_mm2, default_area_model, load_area_model
from phaze.hardware.cluster import Cluster, NetworkTier
from phaze.hardware.presets import ACCELERATORS, CLUSTERS, get_accelerator, get_cluster
from phaze.hardware.sram import SramMacro, sram_macro
from phaze.hardware.space import CandidateSet, DesignSpace, enumerate_space, load_space, space_summary

__all__ = [
    "Accelerator", "ArchArrays", "AreaModel", "area_mm2", "default_area_model", "load_area_model",
    "Cluster", "NetworkTier", "ACCELERATORS", "CLUSTERS", "get_accelerator", "get_cluster",
    "SramMacro", "sram_macro",
    "CandidateSet", "DesignSpace", "enumerate_space", "load_space", "space_summary",
]
