"""Every GPU layout NVIDIA documents, counted: MIG strategy none / single / mixed, time-slicing
renamed or not (the "-SHARED" product suffix), on GPU Operator nodes written as GPU feature
discovery labels them. Pure: in-memory snapshots, no database."""

import pytest

from brickadmin.cluster import deviceplugin as dp
from brickadmin.cluster import vocabulary as vocab
from gpus.numbers import health, ledger
from workspaces import approvals, jobs

from .inmemory import GPU, SHARED, quota, snapshot

A100 = "NVIDIA A100-SXM4-40GB"
MIXED_CFG = "version: v1\nflags:\n  migStrategy: mixed\n"
SINGLE_CFG = "version: v1\nflags:\n  migStrategy: single\n"
TS = "sharing:\n  timeSlicing:\n{rename}    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"


def config(strategy="none", sharing=""):
    text = "version: v1\n" + (f"flags:\n  migStrategy: {strategy}\n" if strategy != "none" else "")
    if sharing:
        text += TS.format(rename="    renameByDefault: true\n" if sharing == "renamed" else "")
    return text


def gpus(n=2, mig=None, model=A100):
    return [{"uuid": f"GPU-{i}", "model": model, "mig": list(mig or [])} for i in range(n)]


def operator_node(name, hardware, cfg):
    """A GPU Operator node as GFD labels it and the device plugin fills its status."""
    labels = {
        "kubernetes.io/hostname": name,
        vocab.GPU_PRESENT_LABEL: "true",
        vocab.DEVICE_PLUGIN_CONFIG_LABEL: "custom",
        **dp.gfd_labels(hardware, cfg),
    }
    adv = {k: str(v) for k, v in dp.advertised_resources(hardware, cfg).items()}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": dict(adv),
            "allocatable": dict(adv),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


# --- what the simulated plugin and GFD produce, from NVIDIA's sources -------------------


def test_gfd_single_strategy_overrides_count_and_product_as_its_readme_shows():
    # docs/gpu-feature-discovery/README.md, "MIG 'single' strategy": 8 GPUs x 7 x 1g.5gb
    hw = gpus(8, ["1g.5gb"] * 7)
    labels = dp.gfd_labels(hw, SINGLE_CFG)
    assert labels[vocab.GPU_PRODUCT_LABEL] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert labels[vocab.GPU_COUNT_LABEL] == "56"
    assert labels[vocab.MIG_STRATEGY_LABEL] == "single"
    assert dp.advertised_resources(hw, SINGLE_CFG) == {GPU: 56}


@pytest.mark.parametrize(
    "hw, reason",
    [
        # internal/rm/device_map.go: the plugin's refusals under mig-strategy=single
        (gpus(1, ["1g.5gb", "3g.20gb"]), "more than one MIG device type present on node"),
        (
            [*gpus(1, ["1g.5gb"] * 7), {"uuid": "GPU-9", "model": A100, "mig": []}],
            "all devices on the node must be configured with the same migEnabled value",
        ),
        ([{"uuid": "GPU-0", "model": A100, "mig": [], "migEnabled": True}], "device 0 has no MIG devices configured"),
    ],
)
def test_single_strategy_refuses_a_node_not_partitioned_alike_and_registers_nothing(hw, reason):
    assert reason in dp.plugin_start_error(hw, SINGLE_CFG)
    assert dp.advertised_resources(hw, SINGLE_CFG) == {}
    assert dp.gfd_labels(hw, SINGLE_CFG)[vocab.GPU_PRODUCT_LABEL] == "NVIDIA-A100-SXM4-40GB-MIG-INVALID"
    assert dp.gfd_labels(hw, SINGLE_CFG)[vocab.GPU_COUNT_LABEL] == "0"


@pytest.mark.parametrize(
    "strategy, sharing, hw, advertised, product",
    [
        # strategy x rename x hardware -> what the plugin registers and GFD's product label
        ("none", "", gpus(2), {GPU: 2}, "NVIDIA-A100-SXM4-40GB"),
        ("none", "plain", gpus(2), {GPU: 8}, "NVIDIA-A100-SXM4-40GB-SHARED"),
        ("none", "renamed", gpus(2), {SHARED: 8}, "NVIDIA-A100-SXM4-40GB"),
        ("mixed", "", gpus(2, ["1g.5gb"] * 7), {"nvidia.com/mig-1g.5gb": 14}, "NVIDIA-A100-SXM4-40GB"),
        (
            "mixed",
            "",
            [*gpus(1, ["3g.20gb"] * 2), *gpus(1)],
            {"nvidia.com/mig-3g.20gb": 2, GPU: 1},
            "NVIDIA-A100-SXM4-40GB",
        ),
        (
            "mixed",
            "plain",
            [*gpus(1, ["3g.20gb"] * 2), *gpus(1)],
            {"nvidia.com/mig-3g.20gb": 2, GPU: 4},
            "NVIDIA-A100-SXM4-40GB-SHARED",
        ),
        ("single", "", gpus(2, ["1g.5gb"] * 7), {GPU: 14}, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"),
        ("single", "plain", gpus(2, ["1g.5gb"] * 7), {GPU: 56}, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED"),
        ("single", "renamed", gpus(2, ["1g.5gb"] * 7), {SHARED: 56}, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"),
        ("single", "", gpus(2), {GPU: 2}, "NVIDIA-A100-SXM4-40GB"),  # single on GPUs without MIG: whole GPUs
    ],
)
def test_plugin_and_gfd_for_every_strategy_and_rename(strategy, sharing, hw, advertised, product):
    cfg = config(strategy, sharing)
    assert dp.advertised_resources(hw, cfg) == advertised
    assert dp.gfd_labels(hw, cfg)[vocab.GPU_PRODUCT_LABEL] == product


def test_gpu_product_taken_apart_with_both_suffixes():
    assert vocab.split_gpu_product("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED") == (
        "NVIDIA-A100-SXM4-40GB",
        "1g.5gb",
        True,
    )
    assert vocab.split_gpu_product("NVIDIA-A30-SHARED") == ("NVIDIA-A30", "", True)
    assert vocab.gpu_model_name("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED") == "NVIDIA A100 SXM4 40GB"
    assert vocab.gpu_model_name("A100-SXM4-40GB-MIG-1g.5gb") == "A100 SXM4 40GB"


# --- the counts the pages show ------------------------------------------------------------


@pytest.mark.parametrize(
    "strategy, sharing, hw, mode, logical, physical, row_type",
    [
        ("none", "", gpus(2), "exclusive", 2, 2, "exclusive"),
        ("none", "plain", gpus(2), "timeslicing", 8, 2, "shared"),
        ("none", "renamed", gpus(2), "timeslicing", 8, 2, "shared"),
        ("mixed", "", gpus(2, ["1g.5gb"] * 7), "mig", 14, 2, "mig-1g.5gb"),
        ("single", "", gpus(2, ["1g.5gb"] * 7), "mig-single", 14, 2, "mig-1g.5gb"),
        ("single", "", gpus(3, ["3g.20gb"] * 2), "mig-single", 6, 3, "mig-3g.20gb"),
        ("single", "plain", gpus(2, ["1g.5gb"] * 7), "mig-single", 56, 2, "mig-1g.5gb"),
        ("single", "renamed", gpus(2, ["1g.5gb"] * 7), "mig-single", 56, 2, "mig-1g.5gb"),
    ],
)
def test_node_mode_logical_and_physical_for_every_layout(strategy, sharing, hw, mode, logical, physical, row_type):
    led = ledger.compute(snapshot([operator_node("n1", hw, config(strategy, sharing))]))
    n = led.node("n1")
    assert (n.mode, n.logical, n.physical) == (mode, logical, physical)
    assert [(r.model, r.gpu_type, r.logical, r.physical) for r in led.by_type] == [
        ("NVIDIA A100 SXM4 40GB", row_type, logical, physical)
    ]


def test_gfd_readme_example_node_under_single_is_eight_gpus_of_56_mig_devices():
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.count": "56",
        "nvidia.com/gpu.memory": "5120",
        "nvidia.com/gpu.slices.gi": "1",
        "nvidia.com/gpu.slices.ci": "1",
    }
    node = {
        "metadata": {"name": "dgx-1", "labels": labels},
        "spec": {},
        "status": {"capacity": {GPU: "56"}, "allocatable": {GPU: "56"}},
    }
    n = ledger.compute(snapshot([node])).node("dgx-1")
    assert (n.mode, n.model, n.physical, n.physical_source, n.logical) == (
        "mig-single",
        "A100 SXM4 40GB",
        8,
        "derived",
        56,
    )
    assert n.served[0].gpu_type == "mig-1g.5gb"


def test_one_model_row_per_physical_model_with_mig_single_beside_whole_gpus():
    led = ledger.compute(
        snapshot(
            [operator_node("whole", gpus(4), config()), operator_node("sliced", gpus(2, ["1g.5gb"] * 7), SINGLE_CFG)],
            quotas=[quota("ws-a", {GPU: 3})],
        )
    )
    assert [(r.label, r.logical, r.physical) for r in led.by_type] == [
        ("NVIDIA A100 SXM4 40GB", 4, 4),
        ("NVIDIA A100 SXM4 40GB MIG 1g.5gb", 14, 2),
    ]
    assert led.physical == 6
    gpu_row = led.resource(GPU)
    assert (gpu_row.logical, gpu_row.gpu_type, gpu_row.mig_on) == (18, ledger.MIXED, [["sliced", "1g.5gb", 14]])
    choice = next(c for c in approvals.gpu_choices(led) if c.resource == GPU)
    text = choice.physical_text(2)
    assert "MIG" in text and "sliced" in text and "cannot tell them apart" in text


def test_jobs_are_refused_on_mig_single_nodes_with_the_seed_reason():
    led = ledger.compute(
        snapshot(
            [operator_node("whole", gpus(2), config()), operator_node("sliced", gpus(2, ["1g.5gb"] * 7), SINGLE_CFG)]
        )
    )
    options = {o.name: o for o in jobs.job_node_options(led)}
    assert options["whole"].selectable
    assert not options["sliced"].selectable and str(options["sliced"].reason) == "MIG nodes do not support Jobs"


def test_a_node_not_partitioned_alike_under_single_is_a_finding_not_whole_gpus():
    hw = gpus(1, ["1g.5gb", "3g.20gb"])
    led = ledger.compute(snapshot([operator_node("bad", hw, SINGLE_CFG)]))
    n = led.node("bad")
    assert (n.mode, n.logical, n.mig_error) == ("mig-single", 0, "not-uniform")
    found = [
        (p.subject, p.kind, p.severity)
        for p in health.problems(health.HealthInputs(ledger=led))
        if p.kind == "mig-single-not-uniform"
    ]
    assert found == [("bad", "mig-single-not-uniform", "bad")]


def test_a_node_line_with_its_mig_profile_survives_the_stored_view():
    led = ledger.compute(snapshot([operator_node("sliced", gpus(2, ["1g.5gb"] * 7), SINGLE_CFG)]))
    n = led.node("sliced")
    assert ledger.node_from_dict(ledger.node_to_dict(n)) == n


# --- NVIDIA's GFD label tables, case by case ------------------------------------------------
# GFD's core labels per resource: product, count, replicas, sharing-strategy (the others,
# memory, family, compute, engines, slices, come from NVML and are not simulated).
CORE = ("product", "count", "replicas", "sharing-strategy")


def sharing_config(how="timeSlicing", *names, rename=False, strategy="none", replicas=2):
    """A plugin config replicating ``names`` (the sharing section of the upstream case)."""
    text = "version: v1\n" + (f"flags:\n  migStrategy: {strategy}\n" if strategy != "none" else "")
    if names:
        text += f"sharing:\n  {how}:\n" + ("    renameByDefault: true\n" if rename else "") + "    resources:\n"
        text += "".join(f"    - name: {n}\n      replicas: {replicas}\n" for n in names)
    return text


def core(labels, resource=GPU):
    return {k: labels[f"{resource}.{k}"] for k in CORE if f"{resource}.{k}" in labels}


def mock(n=1, mig=None, model="MOCKMODEL", enabled=None):
    return [
        {"uuid": f"GPU-{i}", "model": model, "mig": list(mig or []), **({"migEnabled": enabled} if enabled else {})}
        for i in range(n)
    ]


# internal/lm/resource_test.go TestGPUResourceLabeler (a full GPU, count 1). A rename is written
# as renameByDefault: the plugin ignores a resource's own "rename" (api/config/v1/replicas.go
# disableResoureRenaming).
@pytest.mark.parametrize(
    "cfg, want",
    [
        ("version: v1\n", ("MOCKMODEL", "1", "1", "none")),  # no sharing
        (sharing_config("timeSlicing", "nvidia.com/not-gpu"), ("MOCKMODEL", "1", "1", "none")),
        (sharing_config("timeSlicing", GPU), ("MOCKMODEL-SHARED", "1", "2", "time-slicing")),
        (sharing_config("timeSlicing", GPU, rename=True), ("MOCKMODEL", "1", "2", "time-slicing")),
        (sharing_config("mps", "nvidia.com/not-gpu"), ("MOCKMODEL", "1", "1", "none")),
        (sharing_config("mps", GPU), ("MOCKMODEL-SHARED", "1", "2", "mps")),
        (sharing_config("mps", GPU, rename=True), ("MOCKMODEL", "1", "2", "mps")),
    ],
    ids=[
        "no sharing",
        "time-slicing ignores non-matching resource",
        "time-slicing appends suffix and doubles count",
        "time-slicing renamed does not append suffix and doubles count",
        "mps ignores non-matching resource",
        "mps appends suffix and doubles count",
        "mps renamed does not append suffix and doubles count",
    ],
)
def test_gfd_gpu_resource_labels_as_upstream(cfg, want):
    assert core(dp.gfd_labels(mock(), cfg)) == dict(zip(CORE, want, strict=True))


def test_gfd_labels_nothing_without_gpus():
    # resource_test.go "zero count returns empty"; mig-strategy_test.go "no devices returns empty labels"
    assert dp.gfd_labels([], sharing_config("timeSlicing", GPU)) == {}
    assert dp.gfd_labels([], SINGLE_CFG) == {}


# internal/lm/resource_test.go TestMigResourceLabeler (one MIG device; nvidia.com/gpu is the MIG
# labeler under migStrategy single, nvidia.com/mig-<profile> under mixed).
@pytest.mark.parametrize(
    "strategy, resource, names, rename, want",
    [
        ("single", GPU, (), False, ("MOCKMODEL-MIG-1g.5gb", "1", "1", "none")),
        ("single", GPU, (GPU,), False, ("MOCKMODEL-MIG-1g.5gb-SHARED", "1", "2", "time-slicing")),
        ("single", GPU, (GPU,), True, ("MOCKMODEL-MIG-1g.5gb", "1", "2", "time-slicing")),
        (
            "mixed",
            "nvidia.com/mig-1g.5gb",
            (GPU, "nvidia.com/mig-1g.5gb"),
            False,
            ("MOCKMODEL-MIG-1g.5gb-SHARED", "1", "2", "time-slicing"),
        ),
        (
            "mixed",
            "nvidia.com/mig-1g.5gb",
            ("nvidia.com/mig-1g.5gb",),
            True,
            ("MOCKMODEL-MIG-1g.5gb", "1", "2", "time-slicing"),
        ),
    ],
    ids=[
        "no sharing",
        "shared appends suffix and doubles count",
        "renamed does not append suffix and doubles count",
        "mig mixed appends shared",
        "mig mixed rename does not append",
    ],
)
def test_gfd_mig_resource_labels_as_upstream(strategy, resource, names, rename, want):
    cfg = sharing_config("timeSlicing", *names, rename=rename, strategy=strategy)
    assert core(dp.gfd_labels(mock(1, ["1g.5gb"]), cfg), resource) == dict(zip(CORE, want, strict=True))


# internal/lm/mig-strategy_test.go TestMigStrategyNoneLabels (time-slicing nvidia.com/gpu x2):
# MIG-enabled GPUs are labelled without sharing (replicas 0) unless a full GPU is there too.
@pytest.mark.parametrize(
    "hw, want",
    [
        (mock(1), ("MOCKMODEL-SHARED", "1", "2", "time-slicing")),
        (mock(2), ("MOCKMODEL-SHARED", "2", "2", "time-slicing")),
        (mock(1, enabled=True), ("MOCKMODEL", "1", "0", "none")),
        (mock(2, enabled=True), ("MOCKMODEL", "2", "0", "none")),
        ([*mock(1, enabled=True), *mock(1)], ("MOCKMODEL-SHARED", "2", "2", "time-slicing")),
    ],
    ids=[
        "sharing is applied to single device",
        "sharing is applied to multiple devices",
        "sharing is not applied to single MIG device; replicas is zero",
        "sharing is not applied to multiple MIG device; replicas is zero",
        "sharing is applied to MIG device and non-MIG device",
    ],
)
def test_gfd_mig_strategy_none_labels_as_upstream(hw, want):
    labels = dp.gfd_labels(hw, sharing_config("timeSlicing", GPU))
    assert core(labels) == dict(zip(CORE, want, strict=True))
    assert vocab.MIG_STRATEGY_LABEL not in labels


# internal/lm/mig-strategy_test.go TestMigStrategySingleLabels
@pytest.mark.parametrize(
    "hw, want",
    [
        (mock(1), ("MOCKMODEL", "1", "1", "none")),
        (mock(2), ("MOCKMODEL", "2", "1", "none")),
        (mock(1, ["1g.5gb"]), ("MOCKMODEL-MIG-1g.5gb", "1", "1", "none")),
        (mock(2, ["1g.5gb"]), ("MOCKMODEL-MIG-1g.5gb", "2", "1", "none")),
        (mock(1, enabled=True), ("MOCKMODEL-MIG-INVALID", "0", "0", "")),
        (mock(1, ["1g.5gb", "3g.20gb"]), ("MOCKMODEL-MIG-INVALID", "0", "0", "")),
        ([*mock(1, ["1g.5gb"]), *mock(1)], ("MOCKMODEL-MIG-INVALID", "0", "0", "")),
        ([*mock(1, ["1g.5gb"]), *mock(1), *mock(1, enabled=True)], ("MOCKMODEL-MIG-INVALID", "0", "0", "")),
    ],
    ids=[
        "single non-mig device returns non-mig (none) labels",
        "multiple non-mig device returns non-mig (none) labels",
        "single mig-enabled device returns mig labels",
        "multiple mig-enabled devices returns mig labels",
        "empty mig devices returns MIG invalid label",
        "mixed mig config returns MIG invalid label",
        "mixed mig enabled and disabled returns invalid config",
        "enabled, disabled, and empty returns invalid config",
    ],
)
def test_gfd_mig_strategy_single_labels_as_upstream(hw, want):
    labels = dp.gfd_labels(hw, SINGLE_CFG)
    assert core(labels) == dict(zip(CORE, want, strict=True))
    assert labels[vocab.MIG_STRATEGY_LABEL] == "single"


# internal/lm/resource_test.go TestSanitise, as GFD writes a model name into gpu.product
@pytest.mark.parametrize(
    "model, product",
    [
        ("a space separated string", "a-space-separated-string"),
        ("some(thing)else", "somethingelse"),
        ("some ( thing )else", "some-thing-else"),
        ("NVIDIA-TITAN-X-(Pascal)", "NVIDIA-TITAN-X-Pascal"),
        (" input  with multiple   spaces   ", "input-with-multiple-spaces"),
        ("some [ / thing / ]else", "some-thing-else"),
        ("some / thing /else", "some-thing-else"),
        ("some-thing.else_new", "some-thing.else_new"),
    ],
)
def test_gfd_sanitises_the_model_into_the_product_label(model, product):
    assert dp.gfd_labels(mock(model=model), "version: v1\n")[vocab.GPU_PRODUCT_LABEL] == product


def test_a_brick_time_slicing_configmap_that_shares_by_mps_is_mps():
    import dataclasses

    from .inmemory import node as brick_node
    from .inmemory import ts_config

    mps = ts_config(3)
    mps["data"]["config.yaml"] = mps["data"]["config.yaml"].replace("timeSlicing", "mps")
    sliced = brick_node("ts-1", sharing="timeslicing", physical=2, resources={SHARED: (6, 6)})
    snap = dataclasses.replace(snapshot([sliced]), plugin_configmaps=[mps])
    led = ledger.compute(snap)
    n = led.node("ts-1")
    assert (n.sharing_strategy, n.replicas, n.logical, n.physical) == ("mps", 3, 6, 2)
    assert n.mode == "mps"
    assert [(r.label, r.logical, r.physical) for r in led.by_type] == [("NVIDIA A30 (MPS)", 6, 2)]
    # the same node under the time-slicing config stays time-slicing
    plain = ledger.compute(snapshot([sliced]))
    assert [(r.label, r.sharing_strategy) for r in plain.by_type] == [("NVIDIA A30 (Shared)", "time-slicing")]


# --- MPS: what the plugin refuses (internal/plugin/mps.go, cmd/mps-control-daemon/mps) -----------


def mps_config(replicas=2, strategy="none", rename=False):
    flags = "flags:\n  mpsRoot: /run/nvidia/mps\n" + (f"  migStrategy: {strategy}\n" if strategy != "none" else "")
    return (
        "version: v1\n"
        + flags
        + sharing_config("mps", GPU, rename=rename, replicas=replicas).removeprefix("version: v1\n")
    )


def test_mps_of_mig_devices_is_refused_and_registers_nothing():
    hw = gpus(2, ["1g.5gb"] * 7)
    said = "failed to create plugin: sharing using MPS is not supported for MIG devices"
    assert dp.plugin_start_error(hw, mps_config(strategy="single")) == said
    assert dp.advertised_resources(hw, mps_config(strategy="single")) == {}
    # under MIG strategy none a MIG-enabled GPU is served whole, so MPS shares it
    assert dp.plugin_start_error(hw, mps_config()) == ""
    assert dp.advertised_resources(hw, mps_config()) == {GPU: 4}


@pytest.mark.parametrize(
    "model,replicas,refused",
    [
        ("Tesla V100-SXM2-16GB", 16, ""),  # compute capability 7.0: 16 clients (the code's bound is 7.5)
        ("Tesla V100-SXM2-16GB", 17, "17 > 16"),
        ("Tesla T4", 48, ""),  # 7.5
        ("Tesla T4", 49, "49 > 48"),
        ("NVIDIA A100-SXM4-40GB", 48, ""),
        ("NVIDIA H100 80GB HBM3", 49, "49 > 48"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 49, "49 > 48"),
        ("MOCKMODEL", 64, ""),  # a GPU whose compute capability nothing says is not judged
    ],
)
def test_an_mps_server_takes_a_bounded_number_of_clients_by_compute_capability(model, replicas, refused):
    hw = gpus(1, model=model)
    said = dp.plugin_start_error(hw, mps_config(replicas))
    if refused:
        assert said == f"invalid MPS configuration: invalid device maximum allowed replicas exceeded: {refused}"
        assert dp.advertised_resources(hw, mps_config(replicas)) == {}
    else:
        assert said == ""
        assert dp.advertised_resources(hw, mps_config(replicas)) == {GPU: replicas}


def test_gfd_labels_say_the_compute_capability_before_the_model_does():
    labels = {vocab.GPU_COMPUTE_MAJOR_LABEL: "7", vocab.GPU_COMPUTE_MINOR_LABEL: "0"}
    assert dp.compute_capability({"model": "NVIDIA A100-SXM4-40GB"}, labels) == "7.0"
    assert dp.compute_capability({"model": "NVIDIA A100-SXM4-40GB"}) == "8.0"
    assert dp.compute_capability({"model": "MOCKMODEL"}) == ""


def test_mps_renamed_or_not_labels_and_advertises_as_gfd_and_the_plugin_do():
    hw = gpus(2)
    plain, renamed = mps_config(4), mps_config(4, rename=True)
    assert dp.advertised_resources(hw, plain) == {GPU: 8}
    assert dp.advertised_resources(hw, renamed) == {SHARED: 8}
    assert core(dp.gfd_labels(hw, plain)) == {
        "product": "NVIDIA-A100-SXM4-40GB-SHARED",
        "count": "2",
        "replicas": "4",
        "sharing-strategy": "mps",
    }
    assert core(dp.gfd_labels(hw, renamed))["product"] == "NVIDIA-A100-SXM4-40GB"
    # DisableResourceNamingInConfig: a rename of one's own is ignored, renameByDefault or not
    own = plain.replace("replicas: 4", "replicas: 4\n      rename: nvidia.com/mps-gpu")
    assert dp.advertised_resources(hw, own) == {GPU: 8}
    assert dp.advertised_resources(hw, own.replace("  mps:\n", "  mps:\n    renameByDefault: true\n")) == {SHARED: 8}


def test_an_operator_node_shared_by_mps_is_an_mps_node_that_jobs_refuse():
    hw = gpus(2)
    led = ledger.compute(snapshot([operator_node("mps-1", hw, mps_config(4))]))
    n = led.node("mps-1")
    assert (n.mode, n.sharing_strategy, n.replicas, n.logical, n.physical) == ("mps", "mps", 4, 8, 2)
    assert [(r.label, r.logical, r.physical) for r in led.by_type] == [("NVIDIA A100 SXM4 40GB (MPS)", 8, 2)]
    options = {o.name: (o.selectable, str(o.reason)) for o in jobs.job_node_options(led)}
    assert options["mps-1"] == (False, "MPS nodes do not support Jobs")


def operator_snapshot(nodes_and_configs, **configs_extra):
    """GPU Operator nodes reading their configs from the operator's ConfigMap, as the
    ClusterPolicy's devicePlugin.config names it; what a refusing plugin registers: nothing."""
    import dataclasses

    nodes, data = [], {}
    for name, hw, cfg in nodes_and_configs:
        node = operator_node(name, hw, cfg)
        node["metadata"]["labels"][vocab.DEVICE_PLUGIN_CONFIG_LABEL] = name
        data[name] = cfg
        nodes.append(node)
    cm = {"metadata": {"name": "device-plugin-configs", "namespace": "gpu-operator"}, "data": data}
    devices = {name: hw for name, hw, _cfg in nodes_and_configs}
    snap = snapshot(nodes)
    return dataclasses.replace(snap, operator_configmaps=[cm], devices=devices, device_source="dcgm")


def mps_findings(snap):
    led = ledger.compute(snap)
    return [
        (p.subject, p.message, p.remedy)
        for p in health.problems(health.HealthInputs(led, snap))
        if p.kind == "mps-refused"
    ]


def test_health_names_what_the_plugin_refuses_about_mps_and_nothing_on_mps_it_serves():
    snap = operator_snapshot(
        [
            ("mps-ok", gpus(2), mps_config(4)),
            ("mps-mig", gpus(1, ["1g.5gb"] * 7), mps_config(2, strategy="single")),
            ("mps-49", gpus(1, model="NVIDIA H100 80GB HBM3"), mps_config(49)),
            ("mps-mixed", gpus(1), mps_config(2, strategy="mixed")),
            ("ts-ok", gpus(2), sharing_config("timeSlicing", GPU, replicas=4)),
        ]
    )
    found = {subject: (message, remedy) for subject, message, remedy in mps_findings(snap)}
    assert sorted(found) == ["mps-49", "mps-mig", "mps-mixed"]
    message, remedy = found["mps-mig"]
    assert "device-plugin-configs/mps-mig" in message and dp.MPS_OF_MIG_REFUSED in message
    assert "MPS does not share MIG devices" in remedy
    message, remedy = found["mps-49"]
    assert "maximum allowed replicas exceeded: 49 > 48" in message
    assert "at most 48 replicas" in remedy and "compute capability 9.0" in remedy
    message, remedy = found["mps-mixed"]
    assert "using --mig-strategy=mixed is not supported with MPS" in message
    assert "MIG strategy none or single" in remedy


def test_health_reads_the_compute_capability_gfd_labelled_before_the_model():
    import dataclasses

    snap = operator_snapshot([("mps-20", gpus(1, model="MOCKMODEL"), mps_config(20))])
    assert mps_findings(snap) == []  # a model nothing knows: not judged
    labelled = snap.nodes[0]
    labelled["metadata"]["labels"].update({vocab.GPU_COMPUTE_MAJOR_LABEL: "7", vocab.GPU_COMPUTE_MINOR_LABEL: "0"})
    [(_node, message, remedy)] = mps_findings(dataclasses.replace(snap, nodes=[labelled]))
    assert "20 > 16" in message and "at most 16 replicas" in remedy and "compute capability 7.0" in remedy


def test_a_shared_resource_named_without_its_prefix_is_the_plugins_nvidia_com_resource():
    # api/config/v1/resources.go NewResourceName: "gpu" is nvidia.com/gpu
    short = mps_config(49).replace("name: nvidia.com/gpu", "name: gpu")
    hw = gpus(1, model="NVIDIA H100 80GB HBM3")
    assert dp.plugin_start_error(hw, short).endswith("49 > 48")
    ts = sharing_config("timeSlicing", "gpu", replicas=3)
    assert dp.advertised_resources(gpus(2), ts) == {GPU: 6}
    assert core(dp.gfd_labels(gpus(2), ts))["replicas"] == "3"
