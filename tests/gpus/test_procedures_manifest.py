"""The managed device-plugin manifest: validation rules, replicas edit, drift, apply with
a DaemonSet selector change (delete + re-create), versions."""

import copy

import pytest
import yaml

from brickadmin.cluster.snapshot import take_snapshot
from gpus import manifest
from gpus.numbers import health
from gpus.numbers import ledger as ledger_mod

FILE = manifest.MANIFEST_FILE.read_text()


def docs():
    return manifest.parse(FILE)


def ds(d, name):
    return next(x for x in d if x["metadata"]["name"] == name)


def set_ts_config(d, mutate):
    cm = ds(d, manifest.TS_CONFIGMAP)
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    mutate(cfg)
    cm["data"]["config.yaml"] = yaml.safe_dump(cfg)
    return d


def test_shipped_manifest_is_valid():
    v = manifest.validate(docs())
    assert v.ok, v.errors
    assert manifest.ts_replicas(docs()) == 2


def test_tolerations_must_be_identical():
    d = docs()
    ds(d, manifest.TS_DAEMONSET)["spec"]["template"]["spec"]["tolerations"] = []
    assert any("identical tolerations" in e for e in manifest.validate(d).errors)


def test_replicas_at_least_two():
    d = set_ts_config(docs(), lambda c: c["sharing"]["timeSlicing"]["resources"][0].update(replicas=1))
    assert any("at least 2" in e for e in manifest.validate(d).errors)


def test_rename_by_default_under_flags_is_refused():
    def move(c):
        c["sharing"]["timeSlicing"].pop("renameByDefault")
        c["flags"]["renameByDefault"] = True

    errors = manifest.validate(set_ts_config(docs(), move)).errors
    assert any("under flags" in e for e in errors) and any("must be true" in e for e in errors)


def test_node_selectors_on_the_sharing_label():
    d = docs()
    ds(d, manifest.DEFAULT_DAEMONSET)["spec"]["template"]["spec"]["nodeSelector"] = {"brick.cloud/gpu.type": "nvidia"}
    assert any("nodeSelector brick.cloud/gpu.sharing=none" in e for e in manifest.validate(d).errors)


def test_set_replicas_keeps_comments_and_only_changes_replicas():
    out = manifest.set_replicas(FILE, 4)
    assert manifest.ts_replicas(manifest.parse(out)) == 4
    assert out.startswith("# BRICK NVIDIA device plugin")
    assert out.replace("replicas: 4", "replicas: 2") == FILE


def test_versions_and_invalid_content_refused(db):
    assert manifest.current().version == 1
    with pytest.raises(manifest.ManifestError):
        manifest.save_version(FILE.replace("renameByDefault: true", "renameByDefault: false"), actor_name="root")
    v2 = manifest.save_version(manifest.set_replicas(FILE, 3), actor_name="root", note="three")
    assert v2.version == 2 and manifest.current().pk == v2.pk
    assert manifest.save_version(manifest.set_replicas(FILE, 3), actor_name="root").pk == v2.pk  # unchanged


def test_drift_detects_hand_edit_and_apply_restores(twin):
    d = docs()
    assert {i.state for i in manifest.drift(d, twin)} == {"in-sync"}
    live = twin.get_daemonset("brick-nvidia", manifest.TS_DAEMONSET)
    live["spec"]["template"]["spec"]["tolerations"] = []
    twin.apply(live)  # kubectl edit, which docs/operator-guide.md#procedures forbids
    drifted = [i for i in manifest.drift(d, twin) if i.state != "in-sync"]
    assert [i.name for i in drifted] == [manifest.TS_DAEMONSET]
    assert any("tolerations" in p for p in drifted[0].paths)
    manifest.apply(d, twin)
    assert {i.state for i in manifest.drift(d, twin)} == {"in-sync"}


def test_selector_change_is_deleted_and_recreated(twin):
    d = docs()
    new = copy.deepcopy(d)
    target = ds(new, manifest.TS_DAEMONSET)
    target["spec"]["selector"]["matchLabels"]["brick.cloud/plugin"] = "ts"
    target["spec"]["template"]["metadata"]["labels"]["brick.cloud/plugin"] = "ts"
    assert manifest.validate(new).ok
    lines = manifest.apply(new, twin)
    assert f"daemonset.apps/{manifest.TS_DAEMONSET} deleted (spec.selector is immutable)" in lines
    live = twin.get_daemonset("brick-nvidia", manifest.TS_DAEMONSET)
    assert live["spec"]["selector"]["matchLabels"]["brick.cloud/plugin"] == "ts"
    # the time-slicing node still gets its plugin pod from the re-created DaemonSet
    pods = twin.list_pods(namespace="brick-nvidia", field_selector="spec.nodeName=dev-a1-ws02")
    assert [p["status"]["phase"] for p in pods] == ["Running"]


def test_health_finds_each_troubleshooting_case(demo):
    led = ledger_mod.compute(take_snapshot(demo))
    found = {(p.kind, p.subject) for p in health.problems(health.HealthInputs(led))}
    assert ("stale-capacity", "gpu-a100-04") in found
    assert ("label-typo", "gpu-h100-05") in found
    assert ("plugin-missing", "gpu-a100-02") in found  # tainted, no toleration
    assert ("replicas-not-reflected", "gpu-a30-04") in found
    demo.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "workspace-quota", "namespace": "ws-notebooks"},
            "spec": {"hard": {"requests.nvidia.com/gpu.shared": "500"}},
        }
    )
    led = ledger_mod.compute(take_snapshot(demo))
    assert ("quota-over-total", "nvidia.com/gpu.shared") in {
        (p.kind, p.subject) for p in health.problems(health.HealthInputs(led))
    }


# --- configs NVIDIA's device plugin refuses at start -------------------------------------


def ts_resource(**fields):
    def mutate(c):
        c["sharing"]["timeSlicing"]["resources"][0].update(fields)

    return mutate


REFUSED = [
    (ts_resource(devices="not-all"), "devices set as 'not-all' but the only valid string input is 'all'"),
    (ts_resource(devices=-2), "devices set as '-2' but a count of devices must be > 0"),
    (ts_resource(devices=[-1]), "unsupported type for device in devices list: , string"),
    (ts_resource(devices=["GPU-UUID"]), "unsupported type for device in devices list: GPU-UUID, string"),
    (
        ts_resource(devices=["MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"]),
        "unsupported type for device in devices list: MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c, string",
    ),
    (ts_resource(rename="GPU Shared"), "incorrect format for resource name 'nvidia.com/GPU Shared'"),
    (lambda c: c["flags"].update(migStrategy="bogus"), "unknown MIG strategy: bogus"),
    (lambda c: c.update(version="v2"), "unknown version: v2"),
]


@pytest.mark.parametrize("mutate,said", REFUSED)
def test_a_config_the_plugin_refuses_is_refused_with_its_reason(mutate, said):
    errors = manifest.validate(set_ts_config(docs(), mutate)).errors
    mine = [e for e in errors if said in e]
    assert len(mine) == 1 and mine[0].startswith(f"ConfigMap {manifest.TS_CONFIGMAP}, config.yaml: ")


def test_the_default_configmap_is_checked_too():
    d = docs()
    ds(d, "nvidia-device-plugin-config-default")["data"]["config.yaml"] = "version: v1\nflags:\n  migStrategy: all\n"
    errors = manifest.validate(d).errors
    assert next(e for e in errors if "unknown MIG strategy: all" in e).startswith(
        "ConfigMap nvidia-device-plugin-config-default, config.yaml: flags.migStrategy: "
    )
    del ds(d, "nvidia-device-plugin-config-default")["data"]["config.yaml"]
    assert any("nvidia-device-plugin-config-default has no config.yaml" in e for e in manifest.validate(d).errors)


@pytest.mark.parametrize("mutate,said", REFUSED)
def test_a_refused_config_is_neither_saved_nor_applied(db, twin, mutate, said):
    d = set_ts_config(docs(), mutate)
    content = yaml.safe_dump_all(d, sort_keys=False)
    with pytest.raises(manifest.ManifestError) as refused:
        manifest.save_version(content, actor_name="root")
    assert said in str(refused.value)
    assert manifest.current().version == 1
    live_before = twin.get_configmap("brick-nvidia", manifest.TS_CONFIGMAP)["data"]
    with pytest.raises(manifest.ManifestError):
        manifest.apply(d, twin)
    assert twin.get_configmap("brick-nvidia", manifest.TS_CONFIGMAP)["data"] == live_before


def test_a_refused_config_restarted_into_leaves_time_slicing_nodes_advertising_nothing(twin):
    """kubectl edit of the ConfigMap (past the manifest's checks), then a rollout restart:
    the plugin exits at start on every time-slicing node, as the real one does."""
    node = "dev-a1-ws02"
    assert int(twin.get_node(node)["status"]["allocatable"]["nvidia.com/gpu.shared"]) > 0
    cm = twin.get_configmap("brick-nvidia", manifest.TS_CONFIGMAP)
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    cfg["sharing"]["timeSlicing"]["resources"][0]["devices"] = ["GPU-UUID"]
    cm["data"]["config.yaml"] = yaml.safe_dump(cfg)
    twin.apply(cm)
    twin.rollout_restart_daemonset("brick-nvidia", manifest.TS_DAEMONSET)

    status = twin.get_node(node)["status"]
    assert {k: v for k, v in status["allocatable"].items() if k.startswith("nvidia.com/")} == {
        k: "0" for k in status["capacity"] if k.startswith("nvidia.com/")
    }
    [pod] = twin.list_pods(namespace="brick-nvidia", field_selector=f"spec.nodeName={node}")
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert not twin.daemonset_rollout_status("brick-nvidia", manifest.TS_DAEMONSET).done
    # the exclusive nodes' plugin (the other ConfigMap) still serves
    assert twin.daemonset_rollout_status("brick-nvidia", manifest.DEFAULT_DAEMONSET).done

    snapshot = take_snapshot(twin)
    led = ledger_mod.compute(snapshot)
    assert led.node(node).plugin_state == "crashlooping" and led.node(node) in led.plugin_down_nodes
    problems = [
        p
        for p in health.problems(health.HealthInputs(led, snapshot=snapshot))
        if p.kind == "plugin-missing" and p.subject == node
    ]
    assert problems and "CrashLoopBackOff" in problems[0].message
    assert "unsupported type for device in devices list: GPU-UUID, string" in problems[0].message

    # the correct config back, restarted: the plugin serves again
    manifest.apply(docs(), twin)
    twin.rollout_restart_daemonset("brick-nvidia", manifest.TS_DAEMONSET)
    assert int(twin.get_node(node)["status"]["allocatable"]["nvidia.com/gpu.shared"]) > 0
    assert twin.daemonset_rollout_status("brick-nvidia", manifest.TS_DAEMONSET).done


def test_the_manifest_page_refuses_a_config_the_plugin_refuses_and_says_why(twin, admin_client):
    from django.urls import reverse
    from django.utils.html import escape

    content = manifest.current().content.replace(
        "          replicas: 2\n", '          replicas: 2\n          devices: ["GPU-UUID"]\n'
    )
    assert content != manifest.current().content
    r = admin_client.post(reverse("manifest_save"), {"content": content, "note": ""})
    assert r.status_code == 400
    assert escape("unsupported type for device in devices list: GPU-UUID, string") in r.content.decode()
    assert manifest.current().version == 1
    admin_client.post(reverse("manifest_apply"))  # the current version: the shipped, valid one
    live = twin.get_configmap("brick-nvidia", manifest.TS_CONFIGMAP)["data"]["config.yaml"]
    assert "GPU-UUID" not in live
