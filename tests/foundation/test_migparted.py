"""The mig-parted config mig-manager reads, and the layout each named config gives a node's GPUs."""

import pytest

from brickadmin.cluster import migparted

A100_80 = "NVIDIA A100 80GB PCIe"
A100_40 = "NVIDIA A100-SXM4-40GB"

# The shape of the GPU Operator's default-mig-parted-config (NVIDIA/mig-parted README format).
CONFIG = """
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1
  first-two-3g:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  too-many:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 8
  filtered:
    - device-filter: ["0x20B510DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
    - device-filter: "0x20B010DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7
"""


def gpus(model=A100_80, n=4, mig=None):
    return [
        {"uuid": f"GPU-{i}", "model": model, "memoryMiB": 81920, **({"mig": list(mig)} if mig else {})}
        for i in range(n)
    ]


def test_configs_by_name():
    assert list(migparted.parse(CONFIG)) == [
        "all-disabled",
        "all-1g.10gb",
        "all-balanced",
        "first-two-3g",
        "too-many",
        "filtered",
    ]


@pytest.mark.parametrize(
    "text, why",
    [
        ("version: v2\nmig-configs: {}\n", "unknown version"),
        ("version: v1\n", "no mig-configs"),
        ("version: v1\nmig-configs:\n  x: {devices: all}\n", "list of device entries"),
        ("version: v1\nmig-configs:\n  x: [{devices: some, mig-enabled: true}]\n", "devices must be"),
        ("version: v1\nmig-configs:\n  x: [{devices: all, mig-enabled: yes please}]\n", "mig-enabled"),
        (
            "version: v1\nmig-configs:\n  x: [{devices: all, mig-enabled: true, mig-devices: {1g.10gb: -1}}]\n",
            "maps a profile",
        ),
        ("[unclosed", "not YAML"),
    ],
)
def test_what_mig_parted_would_not_read_is_refused(text, why):
    with pytest.raises(migparted.MigPartedError, match=why):
        migparted.parse(text)


def test_all_1g_10gb_gives_seven_instances_on_each_gpu():
    after, why = migparted.layout(migparted.parse(CONFIG), "all-1g.10gb", gpus())
    assert why == ""
    assert [g["mig"] for g in after] == [["1g.10gb"] * 7] * 4
    assert [g["uuid"] for g in after] == ["GPU-0", "GPU-1", "GPU-2", "GPU-3"]


def test_a_mixed_layout_in_the_order_the_config_names_it():
    after, _ = migparted.layout(migparted.parse(CONFIG), "all-balanced", gpus(n=1))
    assert after[0]["mig"] == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]


def test_all_disabled_leaves_whole_gpus():
    after, why = migparted.layout(migparted.parse(CONFIG), "all-disabled", gpus(mig=["3g.40gb", "3g.40gb"]))
    assert why == "" and all("mig" not in g and g["migEnabled"] is False for g in after)


def test_mig_mode_on_without_instances():
    configs = migparted.parse(
        "version: v1\nmig-configs:\n  all-enabled:\n    - devices: all\n"
        "      mig-enabled: true\n      mig-devices: {}\n"
    )
    after, why = migparted.layout(configs, "all-enabled", gpus(n=1))
    assert why == "" and after[0]["migEnabled"] is True and after[0]["mig"] == []


def test_devices_by_index_leave_the_other_gpus_as_they_are():
    before = gpus(mig=["1g.10gb"] * 7)
    after, _ = migparted.layout(migparted.parse(CONFIG), "first-two-3g", before)
    assert [g["mig"] for g in after] == [["3g.40gb"] * 2] * 2 + [["1g.10gb"] * 7] * 2
    assert before[0]["mig"] == ["1g.10gb"] * 7  # the input is not changed


def test_a_layout_the_model_cannot_hold_is_refused_with_the_reason():
    after, why = migparted.layout(migparted.parse(CONFIG), "too-many", gpus())
    assert after is None and why == "GPU 0: NVIDIA A100 80GB PCIe holds at most 7 × 1g.10gb"


def test_a_profile_of_another_model_is_refused():
    after, why = migparted.layout(migparted.parse(CONFIG), "all-balanced", gpus(model=A100_40))
    assert after is None and why == "GPU 0: NVIDIA A100-SXM4-40GB has no MIG profile 2g.20gb"


def test_a_gpu_without_mig_cannot_enable_it():
    after, why = migparted.layout(migparted.parse(CONFIG), "all-1g.10gb", gpus(model="NVIDIA L40S"))
    assert after is None and "has no MIG profiles" in why


def test_an_unknown_config_name_is_refused():
    after, why = migparted.layout(migparted.parse(CONFIG), "all-7g.80gb", gpus())
    assert after is None and "no MIG config named 'all-7g.80gb'" in why


def test_device_filter_by_pci_id_or_else_by_the_profiles_the_model_holds():
    configs = migparted.parse(CONFIG)
    by_id = [dict(g, deviceId="0x20B010DE") for g in gpus(model=A100_40, n=1)]
    assert migparted.layout(configs, "filtered", by_id)[0][0]["mig"] == ["1g.5gb"] * 7
    assert migparted.layout(configs, "filtered", gpus(n=1))[0][0]["mig"] == ["1g.10gb"] * 7
    assert migparted.layout(configs, "filtered", gpus(model=A100_40, n=1))[0][0]["mig"] == ["1g.5gb"] * 7
