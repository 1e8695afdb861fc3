"""The API's edge: names and files to objects (model, accelerator, cluster), the range checks of user values, the
HTML path check, and the runtime checks that need the chip. Every stage call of ``phaze.api`` starts here."""
from __future__ import annotations

from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.accelerator import Accelerator
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import Runtime


def resolve_model(model: str | ModelConfig) -> ModelConfig:
    from phaze.workload.zoo import get_model
    return get_model(model)


def resolve_accelerator(acc: str | Accelerator) -> Accelerator:
    from phaze.hardware.presets import get_accelerator
    return acc if isinstance(acc, Accelerator) else get_accelerator(acc)


def resolve_network(accelerator):
    """The chip's own network when ``accelerator`` is a chip file with a ``network`` mapping (a co-search winner
    written by ``--export-chip``, docs/chip-file.md), else None (presets and Accelerator objects)."""
    if isinstance(accelerator, str) and accelerator.lower().endswith((".yaml", ".yml", ".json")):
        from phaze.hardware.presets import load_accelerator_network
        return load_accelerator_network(accelerator)
    return None


def default_cluster(acc: Accelerator) -> str:
    """GPU presets live in their DGX clusters; designed chips on the paper's flat 4 GiB/s network."""
    return {"a100-80g": "dgx-a100", "h100-80g": "dgx-h100"}.get(acc.name, "flat-4gib")


def resolve_cluster(cluster, accelerator: Accelerator, devices: int, network=None):
    """A Cluster object, ``NAME`` or ``NAME:N`` (a cluster of N devices), or a YAML/JSON cluster file; the
    default cluster follows the accelerator: its own ``network`` (a ChipNetwork, ``resolve_network``) when it
    has one, else ``default_cluster``. Asking for more devices than it has is an InfeasibleError."""
    from phaze.hardware.cluster import Cluster
    from phaze.hardware.presets import get_cluster

    if cluster is None and network is not None:
        from phaze.hardware.chip_network import network_cluster
        return network_cluster(network, devices)
    if isinstance(cluster, Cluster):
        return cluster.with_devices(devices)
    name, _, size = (cluster or default_cluster(accelerator)).partition(":")
    if size and not name.lower().endswith((".yaml", ".yml", ".json")):
        try:
            n = int(size)
        except ValueError:
            raise ConfigError(f"--cluster {cluster!r}: the size after ':' must be an integer, e.g. dgx-a100:64") from None
        if devices > n:
            raise InfeasibleError(f"{devices} devices requested but cluster {name} has {n}; lower --devices or "
                                  f"use a larger cluster")
    elif size:
        name = cluster
    return get_cluster(name, devices)


# estimate and schedule cost one chip's tensor-parallel collectives on a cluster of this many devices (or tp,
# if larger): one DGX node of 8 GPUs, so a group of up to 8 sits on the node's NVLink tier exactly as it
# would inside any larger dgx-a100/dgx-h100 cluster.
TP_CLUSTER_MIN_DEVICES = 8


def tp_tier(cluster, acc: Accelerator, tp: int, network=None):
    """The network tier a tensor-parallel group of ``tp`` devices crosses (for one-chip estimates); ``cluster``:
    a name, a cluster file or a ``Cluster`` object; none given: the chip's own ``network`` when it has one."""
    from phaze.hardware.cluster import Cluster
    from phaze.hardware.presets import get_cluster

    if cluster is None and network is not None:
        from phaze.hardware.chip_network import network_cluster
        return network_cluster(network, max(TP_CLUSTER_MIN_DEVICES, tp)).tier_for_group(tp, 1, "tp")
    if isinstance(cluster, Cluster):
        return cluster.tier_for_group(tp, 1, "tp")
    return get_cluster(cluster or default_cluster(acc), max(TP_CLUSTER_MIN_DEVICES, tp)).tier_for_group(tp, 1, "tp")


def check_ranges(**values) -> None:
    """Each value (or each item of a list) within its ``phaze.limits.RANGES`` bounds; the error names the flag."""
    from phaze.limits import check_all

    check_all(**values)


def check_html_path(path: str | None, option: str = "--html") -> None:
    """Fail before work when an HTML report cannot be written where asked."""
    if path:
        from phaze.report.html import check_output_path
        check_output_path(path, option)


def check_tp_overlap_config(name: str) -> str:
    """The name of a packaged userbuffers configuration, else a one-line ConfigError listing them."""
    from phaze.cost.userbuffers import ub_config_names

    if name not in ub_config_names():
        raise ConfigError(f"--tp-overlap-config: unknown userbuffers configuration {name!r}; use one of "
                          f"{', '.join(ub_config_names())}")
    return name


def check_runtime(runtime: Runtime | None, acc: Accelerator) -> Runtime:
    """The runtime (default ``Runtime()``) checked against what it needs outside itself: a packaged
    userbuffers configuration and FP8 tensor cores for fp8 (a reserve above the chip's HBM: ``DeviceSpec.of``)."""
    runtime = Runtime() if runtime is None else runtime
    if not isinstance(runtime, Runtime):
        raise ConfigError(f"runtime must be a phaze Runtime, got {type(runtime).__name__}")
    check_tp_overlap_config(runtime.tp_overlap_config)
    if runtime.precision == "fp8" and acc.fp8_matrix_factor <= 0:
        raise ConfigError(f"--precision fp8: {acc.name} has no FP8 tensor cores; use bf16 or fp16 (or a chip "
                          f"with fp8_matrix_factor > 0, e.g. h100-80g)")
    return runtime


# the Runtime's MoE fields and the flags that set them (a dense model refuses any of them off its default)
_MOE_FLAGS = (("moe_dispatcher", "--moe-dispatcher"), ("moe_routing", "--moe-routing"),
              ("moe_a2a_overlap", "--moe-a2a-overlap"))


def check_moe(model, runtime: Runtime, ep=(1,), etp=(1,), *, devices: int | None = None,
              group: int | None = None, what: str = "") -> None:
    """The MoE inputs against the model, one line each, before any work: a dense model takes no ``--moe-*``
    flag and no ``--ep`` / ``--etp`` above 1; an MoE model's EP sizes divide its experts (and ``devices``), its
    ETP sizes the experts' FFN, and EP x ETP fits in (``evaluate``: divides) the ``group`` of t x cp x d
    devices the experts fold over. ``ep``, ``etp``: one size or the sizes a plan search may take."""
    ep = (ep,) if isinstance(ep, int) else tuple(ep or ())
    etp = (etp,) if isinstance(etp, int) else tuple(etp or ())
    if not getattr(model, "is_moe", False):
        flags = [flag for name, flag in _MOE_FLAGS if getattr(runtime, name) != getattr(Runtime(), name)]
        flags += [flag for flag, vals in (("--ep", ep), ("--etp", etp)) if any(v > 1 for v in vals)]
        if flags:
            raise ConfigError(f"{model.name} is a dense model (no experts); drop {' and '.join(flags)}")
        return
    runtime.moe_capacity_factor  # noqa: B018 (a bad --moe-routing, one line)
    e, f = model.num_experts, model.moe_ffn
    for v in ep:
        if e % v:
            raise ConfigError(f"{what}--ep {v} must divide the {e} experts of {model.name}")
        if devices is not None and devices % v:
            raise ConfigError(f"{what}--ep {v} must divide the {devices} devices (--devices)")
    for v in etp:
        if f % v:
            raise ConfigError(f"{what}--etp {v} must divide the experts' intermediate size {f} of {model.name}")
    if ep and etp:
        need = min(ep) * min(etp)
        if group is not None and need > group:
            raise ConfigError(f"{what}--ep {min(ep)} x --etp {min(etp)} = {need} is larger than the tp x cp x dp "
                              f"= {group} devices the experts fold over")
        if devices is not None and need > devices:
            raise ConfigError(f"{what}--ep {min(ep)} x --etp {min(etp)} = {need} is larger than the {devices} "
                              f"devices (--devices)")
        if group is not None and len(ep) == len(etp) == 1 and group % need:
            raise ConfigError(f"{what}--ep {ep[0]} x --etp {etp[0]} = {need} must divide tp x cp x dp = {group} "
                              f"(the experts fold over the same devices)")


def with_seq(model, seq_len: int | None, what: str = "--seq"):
    """``model`` with its training sequence length replaced by ``seq_len`` (None: as it is), for the commands
    that take the length from the model (search, reproduce). A learned-position model cannot grow past its
    position table; a traced model was traced at its own length."""
    from dataclasses import replace

    if seq_len is None:
        return model
    check_ranges(seq=seq_len)
    if not isinstance(model, ModelConfig):
        raise ConfigError(f"{what} {seq_len}: {model.name} is a traced model, its sequence length is the trace's; "
                          f"trace it again at that length")
    if model.position == "learned" and seq_len > model.seq_len:
        raise ConfigError(f"{what} {seq_len} exceeds the {model.seq_len} learned positions of {model.name}")
    return replace(model, seq_len=seq_len)
