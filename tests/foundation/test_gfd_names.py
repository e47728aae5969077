"""GPU model names as GPU Feature Discovery writes them into its product label, and one name per
model whichever source gave it."""

import pytest

from brickadmin.cluster import deviceplugin
from brickadmin.cluster import vocabulary as v

# NVIDIA/k8s-device-plugin internal/lm/resource_test.go: TestSanitise
SANITISE = [
    ("a space separated string", "a-space-separated-string"),
    ("some(thing)else", "somethingelse"),
    ("some ( thing )else", "some-thing-else"),
    ("NVIDIA-TITAN-X-(Pascal)", "NVIDIA-TITAN-X-Pascal"),
    (" input  with multiple   spaces   ", "input-with-multiple-spaces"),
    ("some [ / thing / ]else", "some-thing-else"),
    ("some / thing /else", "some-thing-else"),
    ("some-thing.else_new", "some-thing.else_new"),
]


@pytest.mark.parametrize("name, product", SANITISE)
def test_sanitise(name, product):
    assert v.gfd_sanitise(name) == product
    assert deviceplugin._sanitise(name) == product  # the twin's GFD labels the same


@pytest.mark.parametrize(
    "dcgm, label",
    [
        ("NVIDIA TITAN X (Pascal)", "NVIDIA-TITAN-X-Pascal"),
        ("NVIDIA GH200 120GB / 480GB", "NVIDIA-GH200-120GB-480GB"),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"),
        ("NVIDIA A30", "NVIDIA-A30-SHARED"),
    ],
)
def test_dcgms_name_and_gfds_label_are_one_model(dcgm, label):
    assert v.gpu_model_name(dcgm) == v.gpu_model_name(label)
