"""Procedure M on the simulated cluster, whose mig-manager repartitions the GPUs: a layout
applied, one the GPUs cannot hold (mig-manager's failed), one it never finishes, Restore."""

import pytest

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.models import TwinHardware
from brickadmin.cluster.twin import TwinGateway
from gpus.procedures import service
from gpus.procedures.registry import get
from gpus.tasks import execute_run
from tests import mig_node

pytestmark = pytest.mark.usefixtures("fast_engine")

NODE = "gpu-mig-01"
MIG_1G = "nvidia.com/mig-1g.10gb"


@pytest.fixture
def mig(twin):
    twin.apply(mig_node.node(NODE))
    TwinHardware.objects.create(node=NODE, gpus=mig_node.hardware(NODE))
    for obj in mig_node.operator_objects():
        twin.apply(obj)
    return twin


def run_now(code, node, params):
    run = service.start_run(code, node, params, actor_name="root", dispatch=False)
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def labels(gw):
    return gw.get_node(NODE)["metadata"]["labels"]


def allocatable(gw):
    return {k: v for k, v in gw.get_node(NODE)["status"]["allocatable"].items() if k.startswith("nvidia.com/")}


def instances():
    return [g.get("mig", []) for g in TwinHardware.objects.get(node=NODE).gpus]


def test_the_twins_mig_manager_applies_a_layout_and_reports_success(mig):
    mig.label_node(NODE, {vocab.MIG_CONFIG_LABEL: "all-3g.40gb"})
    assert labels(mig)[vocab.MIG_CONFIG_STATE_LABEL] == "success"
    assert instances() == [["3g.40gb", "3g.40gb"]] * 4
    assert allocatable(mig) == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "8"}


def test_mig_manager_runs_only_where_the_operator_deploys_it(mig):
    mig.label_node(NODE, {vocab.MIG_MANAGER_DEPLOY_LABEL: "false"})
    mig.label_node(NODE, {vocab.MIG_CONFIG_LABEL: "all-3g.40gb"})
    assert labels(mig)[vocab.MIG_CONFIG_STATE_LABEL] == "success"  # the old report, untouched
    assert instances() == [[]] * 4


def test_a_layout_applied_drains_relabels_and_uncordons(mig):
    mig._save(mig_node_pod())
    run = run_now("M", NODE, {"mig_config": "all-1g.10gb", "evictions_acknowledged": 1})
    assert run.status == "succeeded", run.message
    assert labels(mig)[vocab.MIG_CONFIG_LABEL] == "all-1g.10gb"
    assert labels(mig)[vocab.MIG_CONFIG_STATE_LABEL] == "success"
    assert instances() == [["1g.10gb"] * 7] * 4
    assert allocatable(mig) == {"nvidia.com/gpu": "0", MIG_1G: "28"}
    assert not (mig.get_node(NODE).get("spec") or {}).get("unschedulable")
    assert not mig.list_pods(field_selector=f"spec.nodeName={NODE}")  # its GPU pod was evicted first


def mig_node_pod():
    from brickadmin.cluster import scenarios

    return scenarios.gpu_pod("ws-exclusive", "trainer", NODE, "nvidia.com/gpu")


def test_the_plan_names_the_pods_on_the_gpus_and_asks_to_acknowledge(mig):
    mig._save(mig_node_pod())
    checks = get("M").prechecks(TwinGateway(), NODE, {"mig_config": "all-1g.10gb"})
    ack = [c for c in checks if c.level == "ack"]
    assert ack and any("ws-exclusive/trainer" in item for item in ack[0].items)
    assert any("after: nvidia.com/mig-1g.10gb: 28" in c.detail for c in checks)
    refused = run_now("M", NODE, {"mig_config": "all-1g.10gb"})
    assert refused.status == "failed" and "acknowledgement" in refused.message
    assert labels(mig)[vocab.MIG_CONFIG_LABEL] == "all-disabled"


def test_a_layout_the_gpus_cannot_hold_is_blocked_by_the_plan(mig):
    checks = get("M").prechecks(TwinGateway(), NODE, {"mig_config": "all-1g.5gb"})
    assert [c.level for c in checks] == ["block"]
    assert "NVIDIA A100 80GB PCIe has no MIG profile 1g.5gb" in checks[0].detail


def test_mig_managers_failure_stops_the_run_and_restore_goes_back(mig, monkeypatch):
    # The ConfigMap changes between the plan and mig-manager's turn: mig-manager reports failed.
    real = get("M").prechecks
    monkeypatch.setattr(
        type(get("M")),
        "prechecks",
        lambda self, gw, node, params: real(gw, node, {**params, "mig_config": "all-3g.40gb"}),
    )
    run = run_now("M", NODE, {"mig_config": "all-1g.5gb"})
    assert run.status == "failed"
    assert "mig-manager reported nvidia.com/mig.config=all-1g.5gb nvidia.com/mig.config.state=failed" in run.message
    assert "NVIDIA A100 80GB PCIe has no MIG profile 1g.5gb" in run.message
    assert "all-disabled" in run.message  # the layout to go back to
    assert instances() == [[]] * 4  # the GPUs are unchanged
    assert labels(mig)[vocab.MIG_CONFIG_STATE_LABEL] == "failed"
    monkeypatch.undo()

    restore = service.start_restore(run, TwinGateway(), actor_name="root", dispatch=False)
    execute_run(restore.pk)
    restore.refresh_from_db()
    assert restore.status == "succeeded", restore.message
    assert labels(mig)[vocab.MIG_CONFIG_LABEL] == "all-disabled"
    assert labels(mig)[vocab.MIG_CONFIG_STATE_LABEL] == "success"
    assert allocatable(mig) == {"nvidia.com/gpu": "4"}
    assert not (mig.get_node(NODE).get("spec") or {}).get("unschedulable")


def test_a_mig_manager_that_never_finishes_times_out_and_restore_goes_back(mig, monkeypatch):
    monkeypatch.setattr(TwinGateway, "_reconfigure_migs", lambda self, node: "pending")
    run = run_now("M", NODE, {"mig_config": "all-1g.10gb"})
    assert run.status == "failed"
    assert "did not report success in time" in run.message and "all-disabled" in run.message
    assert labels(mig)[vocab.MIG_CONFIG_STATE_LABEL] == "pending"
    assert (mig.get_node(NODE).get("spec") or {}).get("unschedulable")  # left cordoned for the admin
    monkeypatch.undo()

    params = service.restore_params(run, TwinGateway())
    assert params["labels"] == {vocab.MIG_CONFIG_LABEL: "all-disabled"}
    restore = service.start_restore(run, TwinGateway(), actor_name="root", dispatch=False)
    execute_run(restore.pk)
    restore.refresh_from_db()
    assert restore.status == "succeeded", restore.message
    assert labels(mig)[vocab.MIG_CONFIG_LABEL] == "all-disabled"
    assert instances() == [[]] * 4
    assert not (mig.get_node(NODE).get("spec") or {}).get("unschedulable")


def test_a_layout_that_leaves_approved_quotas_without_capacity_is_blocked(mig):
    assert run_now("M", NODE, {"mig_config": "all-1g.10gb"}).status == "succeeded"
    mig.create_resource_quota("ws-exclusive", "mig-quota", {"requests.nvidia.com/mig-1g.10gb": "20"})
    checks = get("M").prechecks(TwinGateway(), NODE, {"mig_config": "all-disabled"})
    blocks = [c for c in checks if c.level == "block"]
    assert len(blocks) == 1 and "nvidia.com/mig-1g.10gb" in blocks[0].detail and "20" in blocks[0].detail
    assert "ws-exclusive" in blocks[0].fix
    assert get("M").prechecks(TwinGateway(), NODE, {"mig_config": "all-1g.10gb"})[-1].level != "block"


def test_offered_only_where_mig_manager_runs(mig):
    from gpus.procedures.registry import get as proc
    from gpus.view.reading import read_cluster

    view = read_cluster()
    choices = {c.name: c.reason for c in proc("M").node_choices(view.ledger, view.snapshot)}
    assert choices[NODE] == ""
    assert "mig-manager does not run" in choices["dev-a1-ws04"]


def test_the_wizard_lists_the_layouts_with_what_the_node_would_advertise(mig, admin_client):
    from django.urls import reverse

    page = admin_client.get(reverse("wizard_pick", args=["M"]), {"node": NODE}).content.decode()
    assert "all-1g.10gb — 7 × nvidia.com/mig-1g.10gb on each of 4 GPUs" in page
    assert "all-3g.40gb — 2 × nvidia.com/mig-3g.40gb on each of 4 GPUs" in page
    assert "all-disabled — nvidia.com/gpu (MIG off) on each of 4 GPUs" in page
    assert "all-1g.5gb — mig-manager would refuse it: GPU 0: NVIDIA A100 80GB PCIe has no MIG profile 1g.5gb" in page
    assert f'value="{NODE}"' in page and 'value="dev-a1-ws04" disabled' in page
    node_page = admin_client.get(reverse("node_detail", args=[NODE])).content.decode()
    assert "Change the MIG layout (M)" in node_page
    assert (
        "Change the MIG layout (M)"
        not in admin_client.get(reverse("node_detail", args=["dev-a1-ws04"])).content.decode()
    )
    plan = admin_client.get(reverse("wizard_plan", args=["M"]), {"node": NODE, "mig_config": "all-1g.10gb"})
    assert plan.status_code == 200 and "mig-manager" in plan.content.decode()


# --- the ConfigMap of mig-manager's layouts: the ClusterPolicy names it ---------------------

CUSTOM_LAYOUTS = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  custom-2g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "2g.20gb": 3
"""


def custom_layouts(gw, name="custom-mig-parted-config"):
    gw.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": vocab.GPU_OPERATOR_NAMESPACE},
            "data": {vocab.MIG_PARTED_CONFIG_KEY: CUSTOM_LAYOUTS},
        }
    )


def cluster_policy(gw, config_name):
    # as `kubectl patch clusterpolicies.nvidia.com/cluster-policy` sets spec.migManager.config.name
    gw.apply(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "cluster-policy"},
            "spec": {"migManager": {"enabled": True, "config": {"name": config_name, "default": "all-disabled"}}},
        }
    )


def test_the_layouts_come_from_the_configmap_the_cluster_policy_names(mig, admin_client):
    from django.urls import reverse

    custom_layouts(mig)
    cluster_policy(mig, "custom-mig-parted-config")
    page = admin_client.get(reverse("wizard_pick", args=["M"]), {"node": NODE}).content.decode()
    assert "custom-2g.20gb — 3 × nvidia.com/mig-2g.20gb on each of 4 GPUs" in page
    assert "all-3g.40gb" not in page  # the default ConfigMap's layouts are not mig-manager's here
    run = run_now("M", NODE, {"mig_config": "custom-2g.20gb"})
    assert run.status == "succeeded", run.message
    assert instances() == [["2g.20gb"] * 3] * 4  # mig-manager read the same ConfigMap
    assert allocatable(mig) == {"nvidia.com/gpu": "0", "nvidia.com/mig-2g.20gb": "12"}


def test_without_a_cluster_policy_the_setting_names_the_configmap(mig, admin_client, settings):
    from django.urls import reverse

    custom_layouts(mig, "site-mig-layouts")
    settings.BRICK_MIG_PARTED_CONFIGMAP = "site-mig-layouts"
    page = admin_client.get(reverse("wizard_pick", args=["M"]), {"node": NODE}).content.decode()
    assert "custom-2g.20gb — 3 × nvidia.com/mig-2g.20gb on each of 4 GPUs" in page


def test_a_cluster_policy_that_names_no_configmap_leaves_the_default(mig, admin_client):
    from django.urls import reverse

    mig.apply({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}})
    page = admin_client.get(reverse("wizard_pick", args=["M"]), {"node": NODE}).content.decode()
    assert "all-3g.40gb — 2 × nvidia.com/mig-3g.40gb on each of 4 GPUs" in page


def test_a_missing_configmap_is_named_as_the_cluster_policy_names_it(mig, admin_client):
    from django.urls import reverse

    from gpus.procedures.definitions import mig_configs

    cluster_policy(mig, "nowhere-mig-config")
    page = admin_client.get(reverse("wizard_pick", args=["M"]), {"node": NODE}).content.decode()
    assert "all-3g.40gb" not in page  # not the default ConfigMap's layouts: mig-manager reads another
    configs, why = mig_configs(mig)
    assert (
        configs == {}
        and str(why) == "ConfigMap gpu-operator/nowhere-mig-config (mig-manager's layouts) does not exist."
    )


DEFAULT_LAYOUTS = "default-mig-parted-config"  # the GPU Operator's


@pytest.mark.parametrize(
    "policies, configured, name",
    [
        ([], "", DEFAULT_LAYOUTS),
        ([], "site-layouts", "site-layouts"),
        ([{"metadata": {"name": "p"}, "spec": {"migManager": {"config": {"name": "custom"}}}}], "site", "custom"),
        ([{"metadata": {"name": "p"}, "spec": {"migManager": {"config": {"name": ""}}}}], "", DEFAULT_LAYOUTS),
        ([{"metadata": {"name": "p"}, "spec": {"migManager": None}}], "site", "site"),
    ],
)
def test_the_layouts_configmap_name(policies, configured, name):
    assert vocab.mig_parted_configmap(policies, configured) == name


def test_why_mig_manager_refuses_reads_in_the_readers_language(mig, admin_client):
    """The refusal of a layout (the wizard's list, a plan's pre-check and the run that records
    it) is a message: in Korean it reads in Korean, whatever language the run was started in."""
    from django.urls import reverse
    from django.utils import translation

    from brickadmin import wording
    from brickadmin.cluster import mig as mig_mod

    english = "NVIDIA A100 80GB PCIe has no MIG profile 1g.5gb"
    korean = "NVIDIA A100 80GB PCIe에는 MIG 프로필 1g.5gb이(가) 없습니다"
    admin_client.cookies["django_language"] = "ko"
    page = admin_client.get(reverse("wizard_pick", args=["M"]), {"node": NODE}, HTTP_ACCEPT_LANGUAGE="ko")
    html = page.content.decode()
    assert f"all-1g.5gb — mig-manager가 거부합니다: GPU 0: {korean}" in html and english not in html
    with translation.override("en"):
        (check,) = get("M").prechecks(TwinGateway(), NODE, {"mig_config": "all-1g.5gb"})
        recorded = wording.record_of(check.detail)  # what step 0 of a run keeps
    with translation.override("ko"):
        said_ko = wording.render(recorded)
    assert korean in said_ko and english not in said_ko
    # every code the pure module words a refusal with is registered with the same English
    for code, template in mig_mod.REASONS.items():
        with translation.override("en"):
            assert str(wording.PHRASES[code]) == template


def test_a_mig_parted_config_mig_manager_cannot_read_says_why_in_the_readers_language():
    from django.utils import translation

    from brickadmin.cluster import migparted
    from gpus.procedures.definitions import reason_said

    with pytest.raises(migparted.MigPartedError) as refused:
        migparted.parse({"version": "v1", "mig-configs": {"all-1g.10gb": [{"devices": "all", "mig-enabled": "yes"}]}})
    assert str(refused.value) == "all-1g.10gb: mig-enabled must be true or false"  # the pure module's English
    with translation.override("ko"):
        assert str(reason_said(refused.value.args[0])) == "all-1g.10gb: mig-enabled는 true 또는 false여야 합니다"


def test_the_whole_gpu_resource_left_after_a_layout_is_stale_and_the_fix_removes_it(mig):
    from brickadmin.cluster.snapshot import take_snapshot
    from gpus.numbers import health
    from gpus.numbers import ledger as ledger_mod

    assert run_now("M", NODE, {"mig_config": "all-1g.10gb"}).status == "succeeded"
    snap = take_snapshot(mig)
    node = next(n for n in ledger_mod.compute(snap).nodes if n.name == NODE)
    assert [r.resource for r in node.stale] == ["nvidia.com/gpu"]
    found = [
        p
        for p in health.problems(health.HealthInputs(ledger_mod.compute(snap), snapshot=snap))
        if p.subject == NODE and p.kind == "stale-capacity"
    ]
    assert [p.fix_params for p in found] == [{"stale_resource": "nvidia.com/gpu"}]
    fix = run_now("S", NODE, {"stale_resource": "nvidia.com/gpu"})
    assert fix.status == "succeeded", fix.message
    assert allocatable(mig) == {MIG_1G: "28"}
    assert "nvidia.com/gpu" not in mig.get_node(NODE)["status"]["capacity"]
