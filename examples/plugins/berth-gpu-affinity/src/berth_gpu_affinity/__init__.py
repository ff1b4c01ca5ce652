"""A Berth scheduler plugin: GPU pods go to nodes of the GPU model they ask for."""

from berth_gpu_affinity.plugin import DEFAULT_KEY, ERR_REASON, GpuModelAffinity, GpuModelAffinityArgs

__all__ = ["DEFAULT_KEY", "ERR_REASON", "GpuModelAffinity", "GpuModelAffinityArgs"]
