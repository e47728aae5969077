"""The mig-parted config mig-manager reads, and the layout each named config gives a node's GPUs."""

import functools
from pathlib import Path

import pytest
import yaml

from brickadmin.cluster import mig, migparted
from brickadmin.cluster.upstream import pci_ids

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


def test_device_filter_by_the_reported_pci_id_else_the_models():
    configs = migparted.parse(CONFIG)
    by_id = [dict(g, deviceId="0x20B010DE") for g in gpus(model=A100_40, n=1)]
    assert migparted.layout(configs, "filtered", by_id)[0][0]["mig"] == ["1g.5gb"] * 7
    assert migparted.layout(configs, "filtered", gpus(n=1))[0][0]["mig"] == ["1g.10gb"] * 7
    assert migparted.layout(configs, "filtered", gpus(model=A100_40, n=1))[0][0]["mig"] == ["1g.5gb"] * 7


# --- device-filter: a config entry by PCI device id, as mig-parted matches it --------------

STOCK = Path(__file__).resolve().parents[2] / "scenarios" / "gpu-operator" / "default-mig-parted-config.yaml"


@functools.cache
def stock_text():
    return yaml.safe_load(STOCK.read_text())["data"]["config.yaml"]


@functools.cache
def stock_entries():
    return yaml.safe_load(stock_text())["mig-configs"]


# NVIDIA/mig-parted pkg/types/device_test.go: TestNewDeviceIDFromString
@pytest.mark.parametrize(
    "text, want, error",
    [
        ("0x25B610DE", pci_ids.DeviceID(0x25B6, 0x10DE), ""),
        ("0x25B610DE:0x14A910DE", pci_ids.DeviceID(0x25B6, 0x10DE, 0x14A9, 0x10DE, True), ""),
        ("not-a-device-id", None, "unable to create DeviceID"),
        ("0x25B610DE:not-a-subsystem", None, "unable to create Subsystem"),
        ("0x25B610DE:0x14A910DE:extra", None, "invalid DeviceID format"),
    ],
)
def test_device_id_from_string(text, want, error):
    if error:
        with pytest.raises(pci_ids.DeviceIDError, match=error):
            pci_ids.device_id_from_string(text)
    else:
        assert pci_ids.device_id_from_string(text) == want


# NVIDIA/mig-parted pkg/types/device_test.go: TestDeviceIDString, TestDeviceIDPrimary
def test_device_id_string_and_primary():
    sub = pci_ids.DeviceID(0x25B6, 0x10DE, 0x14A9, 0x10DE, True)
    assert str(pci_ids.DeviceID(0x25B6, 0x10DE)) == "0x25B610DE"
    assert str(sub) == "0x25B610DE:0x14A910DE"
    assert sub.primary() == pci_ids.DeviceID(0x25B6, 0x10DE)


A16 = pci_ids.DeviceID(0x25B6, 0x10DE, 0x14A9, 0x10DE, True)
A2 = pci_ids.DeviceID(0x25B6, 0x10DE, 0x157E, 0x10DE, True)


# NVIDIA/mig-parted pkg/types/device_test.go: TestDeviceIDMatches
@pytest.mark.parametrize(
    "name, filter_, hardware, want",
    [
        ("primary only filter matches same primary id", pci_ids.DeviceID(0x25B6, 0x10DE), A16, True),
        ("subsystem filter matches exact hardware", pci_ids.DeviceID(0x25B6, 0x10DE, 0x14A9, 0x10DE, True), A16, True),
        (
            "subsystem filter rejects sibling subsystem",
            pci_ids.DeviceID(0x25B6, 0x10DE, 0x14A9, 0x10DE, True),
            A2,
            False,
        ),
        (
            "subsystem filter does not match hardware with unknown subsystem",
            pci_ids.DeviceID(0x25B6, 0x10DE, 0x14A9, 0x10DE, True),
            pci_ids.DeviceID(0x25B6, 0x10DE, 0, 0, True),
            False,
        ),
        (
            "zero subsystem filter matches hardware with unknown subsystem",
            pci_ids.DeviceID(0x25B6, 0x10DE, 0, 0, True),
            pci_ids.DeviceID(0x25B6, 0x10DE, 0, 0, True),
            True,
        ),
        ("different primary id does not match", pci_ids.DeviceID(0x1E30, 0x10DE), A16, False),
    ],
)
def test_device_id_matches(name, filter_, hardware, want):
    assert filter_.matches(hardware) is want, name


H100_SUB = pci_ids.DeviceID(0x2330, 0x10DE, 0x16C0, 0x10DE, True)


# NVIDIA/mig-parted api/spec/v1/helpers_test.go: TestMigConfigSpecMatchesDeviceFilter
@pytest.mark.parametrize(
    "name, filter_, want",
    [
        ("empty filter matches all devices", "", True),
        ("primary-only filter matches subsystem-aware hardware", "0x233010DE", True),
        ("matching subsystem filter matches hardware", "0x233010DE:0x16C010DE", True),
        ("sibling subsystem filter does not match hardware", "0x233010DE:0x16C110DE", False),
        (
            "multiple filters stop at a matching subsystem entry",
            ["0x233010DE:0x16C110DE", "0x233010DE:0x16C010DE"],
            True,
        ),
        ("malformed filters with extra separators do not match", "0x233010DE:0x16C010DE:extra", False),
    ],
)
def test_matches_device_filter(name, filter_, want):
    assert pci_ids.matches_device_filter(filter_, H100_SUB) is want, name


@pytest.mark.parametrize(
    "text, value",
    [("0x20B510DE", 0x20B510DE), ("0X20b510de", 0x20B510DE), ("017", 15), ("1_000", 1000), ("0x_1F", 31)],
)
def test_ids_are_read_as_go_reads_them(text, value):
    assert pci_ids._parse_uint32(text) == value


@pytest.mark.parametrize("text", ["", "_1", "1__0", "0x", " 1", "+1", "08", "0x1FFFFFFFF", "١"])
def test_what_go_does_not_read_as_an_id(text):
    with pytest.raises(pci_ids.DeviceIDError):
        pci_ids._parse_uint32(text)


@pytest.mark.parametrize(
    "model, device_id",
    [
        ("NVIDIA A100 80GB PCIe", "0x20B510DE"),
        ("NVIDIA-A100-80GB-PCIe", "0x20B510DE"),  # GFD's product label
        ("NVIDIA-A100-80GB-PCIe-MIG-1g.10gb", "0x20B510DE"),
        ("NVIDIA A100-SXM4-40GB", "0x20B010DE"),
        ("NVIDIA A100-PCIE-40GB", "0x20B110DE"),
        ("NVIDIA H100 PCIe", "0x233110DE"),
        ("NVIDIA H100 80GB HBM3", "0x233010DE"),
        ("NVIDIA A30", "0x20B710DE"),
        ("NVIDIA H200", "0x233510DE"),
        ("NVIDIA GH200 144G HBM3e", "0x234810DE"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "0x2BB510DE"),
        ("NVIDIA L40S", ""),  # no MIG: not listed
        ("", ""),
    ],
)
def test_a_models_pci_device_id(model, device_id):
    assert pci_ids.device_id_of(model) == device_id


def test_a100_80gb_pcie_gets_the_80gb_entry_of_the_stock_all_1g_10gb():
    configs = migparted.parse(stock_text())
    after, why = migparted.layout(configs, "all-1g.10gb", gpus())
    assert why == "" and [len(g["mig"]) for g in after] == [7] * 4
    assert migparted.guessed_gpus(configs, "all-1g.10gb", gpus()) == []
    after, _why = migparted.layout(configs, "all-1g.10gb", gpus(model=A100_40, n=2))
    assert [len(g["mig"]) for g in after] == [4, 4]


def test_the_stock_all_balanced_follows_each_parts_own_entry():
    configs = migparted.parse(stock_text())

    def balanced(model):
        return migparted.layout(configs, "all-balanced", gpus(model=model, n=1))[0][0]["mig"]

    assert balanced("NVIDIA H100 PCIe") == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]  # with the 80 GB parts
    assert balanced("NVIDIA H100 NVL") == ["1g.12gb", "1g.12gb", "2g.24gb", "3g.47gb"]
    assert balanced("NVIDIA A30") == ["1g.6gb", "1g.6gb", "2g.12gb"]
    assert balanced("NVIDIA H200") == ["1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"]
    assert balanced("NVIDIA RTX PRO 6000 Blackwell Server Edition") == ["1g.24gb", "1g.24gb", "2g.48gb"]


def test_a_reported_device_id_wins_over_the_models():
    configs = migparted.parse(stock_text())
    reported = [dict(g, deviceId="0x20B010DE") for g in gpus(n=1)]  # an A100 80GB reporting a 40 GB id
    assert migparted.layout(configs, "all-1g.10gb", reported)[0][0]["mig"] == ["1g.10gb"] * 4


def test_a_gpu_no_entry_selects_is_left_as_it_is():
    configs = migparted.parse(stock_text())
    after, why = migparted.layout(configs, "all-1g.10gb", gpus(model="NVIDIA A30", n=1))
    assert why == "" and after == gpus(model="NVIDIA A30", n=1)


def test_a_model_without_an_id_is_guessed_and_says_so():
    configs = migparted.parse(stock_text())
    unknown = gpus(model="NVIDIA A100-SXM-64GB", n=2)  # an A100 the PCI id table does not name
    assert migparted.guessed_gpus(configs, "all-1g.10gb", unknown) == [0, 1]
    assert migparted.guessed_gpus(configs, "all-3g.40gb", unknown) == []  # no entry filters by id
    assert migparted.layout(configs, "all-1g.10gb", unknown)[0][0]["mig"] == ["1g.10gb"] * 4


def test_a_device_filter_mig_parted_would_not_read_is_refused():
    with pytest.raises(migparted.MigPartedError, match="device-filter"):
        migparted.parse("version: v1\nmig-configs:\n  x: [{devices: all, mig-enabled: false, device-filter: 42}]\n")


# Every GPU model the MIG tables know, by the name the PCI id list gives its part.
MIG_MODELS = sorted(
    {names[-1] for names in pci_ids.DEVICE_IDS.values() if mig.profiles_of(names[-1]) and names[-1].startswith("N")}
)


def expected_by_mig_parted(name, model):
    """What mig-parted does with config ``name`` on one GPU of ``model``, read straight from the
    config's text: the last entry whose device-filter names the part's id (or has none) wins."""
    device = pci_ids.device_id_of(model)
    chosen = None
    for entry in stock_entries()[name]:
        wanted = entry.get("device-filter")
        wanted = [wanted] if isinstance(wanted, str) else wanted
        if not wanted or device.upper() in {w.upper() for w in wanted}:
            chosen = entry
    if chosen is None:
        return "unchanged"
    if not chosen["mig-enabled"]:
        return []
    devices = chosen.get("mig-devices") or {}
    if mig.layout_error(model, devices):
        return "refused"
    return [p for p, n in devices.items() for _ in range(n)]


def test_the_mig_tables_know_the_parts_the_stock_config_names():
    assert len(MIG_MODELS) >= 20
    assert all(pci_ids.device_id_of(m) for m in MIG_MODELS)


@pytest.mark.parametrize("model", MIG_MODELS)
def test_every_stock_config_on_every_model(model):
    configs = migparted.parse(stock_text())
    for name in configs:
        want = expected_by_mig_parted(name, model)
        after, why = migparted.layout(configs, name, gpus(model=model, n=2))
        assert migparted.guessed_gpus(configs, name, gpus(model=model, n=2)) == []
        if want == "refused":
            assert after is None and why, (name, model)
        elif want == "unchanged":
            assert after == gpus(model=model, n=2), (name, model)
        else:
            assert [g.get("mig", []) for g in after] == [want, want], (name, model)


def test_the_stock_configs_each_part_is_meant_for_are_applied():
    """The parts the stock config's comments name for a config hold it (no refusal)."""
    configs = migparted.parse(stock_text())
    meant = {
        "all-1g.10gb": ["NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe", "NVIDIA A800 40GB PCIe"],
        "all-1g.5gb": ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"],
        "all-1g.6gb": ["NVIDIA A30"],
        "all-1g.12gb": ["NVIDIA H100 NVL", "NVIDIA H800 NVL", "NVIDIA GH200 480GB"],
        "all-7g.94gb": ["NVIDIA H100 NVL"],
        "all-7g.96gb": ["NVIDIA H100 96GB HBM3", "NVIDIA GH200 480GB"],
        "all-1g.23gb": ["NVIDIA GB200", "NVIDIA B200"],
        "all-7g.141gb": ["NVIDIA H200", "NVIDIA H200 NVL"],
        "all-7g.144gb": ["NVIDIA GH200 144G HBM3e"],
        "all-7g.269gb": ["NVIDIA B300 SXM6 AC"],
        "all-7g.278gb": ["NVIDIA GB300"],
        "all-1g.24gb.gfx": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"],
        "all-4g.96gb": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"],
    }
    for name, models in meant.items():
        for model in models:
            after, why = migparted.layout(configs, name, gpus(model=model, n=1))
            assert why == "" and after[0]["mig"], (name, model)
