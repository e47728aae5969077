"""Which device-plugin configs NVIDIA's k8s-device-plugin loads, and the reason it gives for
the others: its own test tables, case by case, through a whole config file as the plugin
reads it (sigs.k8s.io/yaml, then its UnmarshalJSON methods and validateFlags)."""

from __future__ import annotations

import json

import pytest

from brickadmin.cluster import pluginconfig as pc
from brickadmin.cluster.pluginconfig import plugin_config_errors

GPU_UUID = "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"


def ts_config(resource: dict | str, **sharing) -> str:
    """A config sharing one resource by time-slicing; ``resource`` a dict or YAML text."""
    body = resource if isinstance(resource, str) else json.dumps(resource)
    extra = "".join(f"    {k}: {json.dumps(v)}\n" for k, v in sharing.items())
    return f"version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n{extra}    resources:\n    - {body}\n"


def with_devices(devices_yaml: str) -> str:
    return ts_config(f"{{name: nvidia.com/gpu, replicas: 2, devices: {devices_yaml}}}")


def refused(config) -> str:
    errors = plugin_config_errors(config)
    assert errors, "the plugin would load this config"
    return " ".join(errors)


# api/config/v1/replicas_test.go TestReplicatedDeviceRef
@pytest.mark.parametrize(
    "ref,kind",
    [
        ("0", "gpuIndex"),
        ("0:0", "migIndex"),
        ("GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c", "uuid"),
        ("MIG-3eb87630-93d5-b2b6-b8ff-9b359caf4ee2", "uuid"),
        ("MIG-GPU-662077db-fa3f-0d8f-9502-21ab0ef058a2/10/0", "uuid"),
    ],
)
def test_a_device_reference_is_of_exactly_one_kind(ref, kind):
    assert pc.is_gpu_index(ref) == (kind == "gpuIndex")
    assert pc.is_mig_index(ref) == (kind == "migIndex")
    assert (pc.is_gpu_uuid(ref) or pc.is_mig_uuid(ref)) == (kind == "uuid")


# api/config/v1/replicas_test.go TestUnmarshalReplicatedDevices, each as the devices of a
# time-slicing resource in a whole config file.
@pytest.mark.parametrize(
    "devices,said",
    [
        ("", "devices set as '' but the only valid string input is 'all'"),  # nothing: null
        ('"not-all"', "devices set as 'not-all' but the only valid string input is 'all'"),
        ("-2", "devices set as '-2' but a count of devices must be > 0"),
        ("[-1]", "unsupported type for device in devices list: , string"),
        ('["-1"]', "unsupported type for device in devices list: -1, string"),
        ('["invalid-UUID"]', "unsupported type for device in devices list: invalid-UUID, string"),
        ('["GPU-UUID"]', "unsupported type for device in devices list: GPU-UUID, string"),
        ('["MIG-UUID"]', "unsupported type for device in devices list: MIG-UUID, string"),
        (
            '["MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"]',
            "unsupported type for device in devices list: MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c, string",
        ),
        # beyond the table: the other shapes its UnmarshalJSON refuses
        ("0", "devices set as '0' but a count of devices must be > 0"),
        ("2.5", "unrecognized type for devices spec: 2.5"),
        ("true", "unrecognized type for devices spec: true"),
        ("{count: 2}", 'unrecognized type for devices spec: {"count":2}'),
        ('["0:0:0"]', "unsupported type for device in devices list: 0:0:0, string"),
        ('["+1"]', "unsupported type for device in devices list: +1, string"),
        ("[true]", "unsupported type for device in devices list: , string"),
        (
            '["MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c/1"]',
            "unsupported type for device in devices list: MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c/1, string",
        ),
        (
            '["MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c/1/x"]',
            "unsupported type for device in devices list: MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c/1/x, string",
        ),
    ],
)
def test_devices_the_plugin_refuses(devices, said):
    assert said in refused(with_devices(devices))


@pytest.mark.parametrize(
    "devices",
    [
        '"all"',
        "2",
        "[0]",
        '["0"]',
        '["0:0"]',
        '["GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"]',
        '["MIG-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"]',
        '["MIG-GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c/0/0"]',
        '[0, "0:0", "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"]',  # the kinds may be mixed
        '["0", "0:0", "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"]',
        # The table refuses the JSON literal 2.0; in a config file sigs.k8s.io/yaml turns the
        # YAML float 2.0 into the JSON number 2, so the plugin loads it.
        "2.0",
        # google/uuid also parses 32 bare hex digits, braces and urn:uuid:
        '["GPU-4cf8db2d06c07d701a51e59b25b2c16c"]',
        '["GPU-{4cf8db2d-06c0-7d70-1a51-e59b25b2c16c}"]',
        '["GPU-urn:uuid:4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"]',
    ],
)
def test_devices_the_plugin_loads(devices):
    assert plugin_config_errors(with_devices(devices)) == []


# api/config/v1/replicas_test.go TestUnmarshalReplicatedResource
@pytest.mark.parametrize(
    "resource,said",
    [
        ({}, "no resource name specified"),
        ({"name": "valid"}, "no replicas specified"),
        ({"name": "valid", "devices": "all"}, "no replicas specified"),
        ({"name": "valid", "devices": "all", "rename": "valid-shared"}, "no replicas specified"),
        ({"name": "valid", "replicas": -1}, "number of replicas must be >= 2"),
        ({"name": "valid", "replicas": 0}, "number of replicas must be >= 2"),
        (
            {"name": "$invalid$", "replicas": 2, "rename": "valid-shared"},
            "incorrect format for resource name 'nvidia.com/$invalid$'",
        ),
        (
            {"name": "valid", "replicas": 2, "rename": "$invalid$"},
            "incorrect format for resource name 'nvidia.com/$invalid$'",
        ),
        # beyond the table
        ({"name": "nvidia.com/gpu", "replicas": 1}, "number of replicas must be >= 2"),
        ({"name": "nvidia.com/gpu", "replicas": None}, "number of replicas must be >= 2"),
        ({"name": "nvidia.com/gpu", "replicas": "2"}, "json: cannot unmarshal string into Go value of type int"),
        ({"name": "nvidia.com/gpu", "replicas": 2.5}, "json: cannot unmarshal number into Go value of type int"),
        ({"name": "nvidia.com/gpu", "replicas": True}, "json: cannot unmarshal bool into Go value of type int"),
        ({"name": "nvidia.com/gpu", "replicas": 2, "rename": ""}, "incorrect format for resource name 'nvidia.com/'"),
        ({"name": "nvidia.com/gpu", "replicas": 2, "rename": "GPU-Shared"}, "a lowercase RFC 1123 subdomain"),
        ({"name": "nvidia.com/gpu", "replicas": 2, "rename": "gpu.shared."}, "a lowercase RFC 1123 subdomain"),
        (
            {"name": "nvidia.com/gpu", "replicas": 2, "rename": "example.com/gpu"},
            "incorrect format for resource name 'nvidia.com/example.com/gpu'",
        ),
        (
            {"name": "nvidia.com/gpu", "replicas": 2, "rename": "g" * 53},
            "fully-qualified resource name must be 63 characters or less",
        ),
        ({"name": 5, "replicas": 2}, "json: cannot unmarshal number into Go value of type string"),
    ],
)
def test_resources_the_plugin_refuses(resource, said):
    assert said in refused(ts_config(resource))


@pytest.mark.parametrize(
    "resource",
    [
        {"name": "valid", "devices": "all", "replicas": 2},
        {"name": "valid", "devices": "all", "replicas": 2, "rename": "valid-shared"},
        {"name": "valid", "replicas": 2},
        {"name": "valid", "replicas": 2, "rename": "valid-shared"},
        # beyond the table
        {"name": "nvidia.com/gpu", "replicas": 2, "rename": "gpu.shared"},
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 4},
        {"name": "nvidia.com/gpu", "replicas": 2, "rename": "g" * 52},  # 63 with nvidia.com/
        {"name": "nvidia.com/gpu", "replicas": 2, "comment": "unknown fields are ignored"},
    ],
)
def test_resources_the_plugin_loads(resource):
    assert plugin_config_errors(ts_config(resource)) == []


# api/config/v1/replicas_test.go TestUnmarshalReplicatedResources
@pytest.mark.parametrize(
    "time_slicing,said",
    [
        ("null", "no resources specified"),
        ("{}", "no resources specified"),
        ("{resources: []}", "no resources specified"),
        ("{resources: [{name: $invalid$, replicas: 2}]}", "incorrect format for resource name"),
        # beyond the table
        (
            "{renameByDefault: 'yes', resources: [{name: gpu, replicas: 2}]}",
            "json: cannot unmarshal string into Go value of type bool",
        ),
        (
            "{failRequestsGreaterThanOne: 1, resources: [{name: gpu, replicas: 2}]}",
            "json: cannot unmarshal number into Go value of type bool",
        ),
        (
            "{resources: {name: gpu, replicas: 2}}",
            "json: cannot unmarshal object into Go value of type []v1.ReplicatedResource",
        ),
        ("[]", "json: cannot unmarshal array into Go value of type map[string]json.RawMessage"),
    ],
)
def test_time_slicing_sections_the_plugin_refuses(time_slicing, said):
    assert said in refused(f"version: v1\nsharing:\n  timeSlicing: {time_slicing}\n")


@pytest.mark.parametrize(
    "time_slicing",
    [
        "{resources: [{name: valid, replicas: 2}]}",
        "{resources: [{name: valid1, replicas: 2}, {name: valid2, replicas: 2}]}",
        # the plugin does not look for the same name twice: it loads it
        "{resources: [{name: gpu, replicas: 2}, {name: nvidia.com/gpu, replicas: 4}]}",
        "{renameByDefault: true, failRequestsGreaterThanOne: false, resources: [{name: gpu, replicas: 2}]}",
    ],
)
def test_time_slicing_sections_the_plugin_loads(time_slicing):
    assert plugin_config_errors(f"version: v1\nsharing:\n  timeSlicing: {time_slicing}\n") == []


# api/config/v1/config_test.go (MPS: failRequestsGreaterThanOne defaults to true, false is
# honoured) and validateFlags in cmd/nvidia-device-plugin/main.go (MPS needs --mps-root and
# not --mig-strategy=mixed).
MPS = "sharing:\n  mps:\n{extra}    resources:\n      - name: nvidia.com/gpu\n        replicas: 2\n"


@pytest.mark.parametrize(
    "config",
    [
        "version: v1\nflags:\n  mpsRoot: /run/nvidia/mps\n" + MPS.format(extra=""),
        "version: v1\nflags:\n  mpsRoot: /run/nvidia/mps\n"
        + MPS.format(extra="    failRequestsGreaterThanOne: false\n"),
        "version: v1\nsharing:\n  mps: null\n",
    ],
)
def test_mps_configs_the_plugin_loads(config):
    assert plugin_config_errors(config) == []


@pytest.mark.parametrize(
    "config,said",
    [
        ("version: v1\n" + MPS.format(extra=""), "using MPS requires --mps-root to be specified"),
        (
            "version: v1\nflags:\n  migStrategy: mixed\n  mpsRoot: /run/nvidia/mps\n" + MPS.format(extra=""),
            "using --mig-strategy=mixed is not supported with MPS",
        ),
        (
            "version: v1\nflags:\n  mpsRoot: /m\n" + MPS.format(extra="").replace("replicas: 2", "replicas: 1"),
            "number of replicas must be >= 2",
        ),
    ],
)
def test_mps_configs_the_plugin_refuses(config, said):
    assert said in refused(config)


# api/config/v1/resources_test.go TestResourcePatternMatches
@pytest.mark.parametrize(
    "pattern,name,expected",
    [
        ("1g.24gb", "1g.24gb", True),
        ("1g.24gb", "2g.48gb", False),
        ("1g.24gb", "1g.24gb-me", False),
        ("1g.24gb", "1g.24gb+me.all", False),
        ("1g.24gb", "x1g.24gb", False),
        ("1g.24gb-me", "1g.24gb-me", True),
        ("1g.24gb+me.all", "1g.24gb+me.all", True),
        ("*", "1g.24gb-me", True),
        ("1g.*", "1g.24gb", True),
        ("1g.*", "2g.48gb", False),
        ("1g.24gb+gfx", "1g.24gb+gfx", True),
        ("1g.24gb", "1g.24gb+gfx", False),
        ("1g.24gb+gfx", "1g.24gb", False),
        ("1g.24gb+gfx", "1g.24gb-me", False),
        ("2g.48gb+gfx", "2g.48gb+gfx", True),
        ("2g.48gb", "2g.48gb+gfx", False),
        ("*gb", "1g.24gb", True),
        ("*gb", "1g.24gb-me", False),
    ],
)
def test_resource_pattern_matches(pattern, name, expected):
    assert pc.pattern_matches(pattern, name) is expected


@pytest.mark.parametrize(
    "resources,said",
    [
        ("{gpus: [{name: gpu}]}", "resources must have a 'pattern' field set"),
        ("{gpus: [{pattern: '*'}]}", "resources must have a 'name' field set"),
        ("{mig: [{pattern: '1g.*', name: Mig_1g}]}", "incorrect format for resource name 'nvidia.com/Mig_1g'"),
    ],
)
def test_resources_section_the_plugin_refuses(resources, said):
    assert said in refused(f"version: v1\nresources: {resources}\n")


def test_resources_section_is_read_then_ignored():
    assert (
        plugin_config_errors(
            "version: v1\nresources: {gpus: [{pattern: '*', name: gpu}], mig: [{pattern: '1g.*', name: mig-1g}]}\n"
        )
        == []
    )


# api/config/v1/flags_test.go TestUnmarshalFlags (a config's flags)
@pytest.mark.parametrize(
    "flags",
    [
        "{}",
        "{gfd: {}}",
        "{gfd: {sleepInterval: 0}}",
        "{gfd: {sleepInterval: 0s}}",
        "{gfd: {sleepInterval: 5}}",
        "{gfd: {sleepInterval: 5s}}",
        "{gfd: {sleepInterval: infinite}}",
        "{plugin: {deviceListStrategy: envvar}}",
        "{plugin: {deviceListStrategy: [envvar, cdi-annotations]}}",
        # beyond the table
        "{gfd: {sleepInterval: 1h30m}}",
        "{gfd: {sleepInterval: '-1.5us'}}",
        (
            "{migStrategy: single, failOnInitError: false, plugin: {deviceIDStrategy: index, "
            "sharedDevicesAllocationPolicy: packed, passDeviceSpecs: true}, deviceDiscoveryStrategy: nvml}"
        ),
        "{MIGSTRATEGY: none}",  # encoding/json matches field names case-insensitively
    ],
)
def test_flags_the_plugin_loads(flags):
    assert plugin_config_errors(f"version: v1\nflags: {flags}\n") == []


# validateFlags in cmd/nvidia-device-plugin/main.go, and the flags' types (flags.go)
@pytest.mark.parametrize(
    "flags,said",
    [
        ("{migStrategy: bogus}", "unknown MIG strategy: bogus"),
        ("{migStrategy: ''}", "unknown MIG strategy: "),
        ("{MigStrategy: Mixed}", "unknown MIG strategy: Mixed"),
        ("{migStrategy: true}", "unknown MIG strategy: true"),  # sigs.k8s.io/yaml: a bool read as a string
        ("{plugin: {deviceListStrategy: bogus}}", "invalid --device-list-strategy option: invalid strategy: bogus"),
        ("{plugin: {deviceListStrategy: 5}}", "invalid deviceListStrategy: 5"),
        ("{plugin: {deviceIDStrategy: serial}}", "invalid --device-id-strategy option: serial"),
        (
            "{plugin: {sharedDevicesAllocationPolicy: random}}",
            "invalid --shared-devices-allocation-policy option: random",
        ),
        ("{deviceDiscoveryStrategy: wsl}", "invalid --device-discovery-strategy option wsl"),
        ("{failOnInitError: 'no'}", "json: cannot unmarshal string into Go value of type bool"),
        ("{gfd: {sleepInterval: soon}}", 'time: invalid duration "soon"'),
        ("{gfd: {sleepInterval: true}}", "invalid duration"),
        ("[migStrategy]", "json: cannot unmarshal array into Go value of type v1.Flags"),
    ],
)
def test_flags_the_plugin_refuses(flags, said):
    assert said in refused(f"version: v1\nflags: {flags}\n")


# config.go parseConfigFrom and imex.go AssertChannelIDsValid
@pytest.mark.parametrize(
    "config,said",
    [
        ("version: v2\n", "unknown version: v2"),
        ("version: 1\n", "unknown version: 1"),
        ("- version: v1\n", "json: cannot unmarshal array into Go value of type v1.Config"),
        ("version: v1\nsharing: [timeSlicing]\n", "json: cannot unmarshal array into Go value of type v1.Sharing"),
        ("version: v1\nimex: {channelIDs: [1]}\n", "channelIDs must be [] or [0]; found [1]"),
        ("version: v1\nimex: {channelIDs: [0, 0]}\n", "channelIDs must be [] or [0]; found [0 0]"),
        ("version: v1\nsharing: {timeSlicing: {resources: [{name: gpu\n", "unmarshal error"),
    ],
)
def test_files_the_plugin_refuses(config, said):
    assert said in refused(config)


@pytest.mark.parametrize(
    "config",
    [
        "",
        "version: v1\n",
        "version:\n",
        "version: v1\nimex: {channelIDs: [0], required: true}\n",
        "version: v1\nunknownTopLevel: {anything: [1, 2]}\n",  # not strict: unknown fields are ignored
        {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
    ],
)
def test_files_the_plugin_loads(config):
    assert plugin_config_errors(config) == []


def test_the_reason_names_the_field_says_why_and_quotes_the_plugin():
    [error] = plugin_config_errors(with_devices('"not-all"'))
    assert error.startswith("sharing.timeSlicing.resources[0].devices: ")
    assert 'must be "all"' in error
    assert "\"devices set as 'not-all' but the only valid string input is 'all'\"" in error


def test_every_wrong_resource_is_reported_not_only_the_first():
    config = (
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        "    - {name: gpu, replicas: 1}\n    - {name: gpu, replicas: 2, rename: Bad}\n"
    )
    errors = plugin_config_errors(config)
    assert [e.split(":")[0] for e in errors] == [
        "sharing.timeSlicing.resources[0].replicas",
        "sharing.timeSlicing.resources[1].rename",
    ]


def test_a_file_of_nested_aliases_is_judged_without_expanding_it():
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]  # 10^9 strings
    config = "version: v1\nunknown:\n" + "".join(f"  {line}\n" for line in levels)
    assert plugin_config_errors(config) == []
    devices = config + "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: {d: *a8}}]}}\n"
    [error] = plugin_config_errors(devices)
    assert 'unrecognized type for devices spec: {"d":[[[[' in error and len(error) < 600


def test_a_file_nested_too_deeply_is_refused_not_a_crash():
    assert "nested too deeply" in refused("version: v1\nunknown: " + "[" * 600 + "]" * 600 + "\n")


# --- MPS as its own sharing strategy ------------------------------------------------------------


# api/config/v1/sharing.go Sharing.SharingStrategy: MPS wins when it replicates something.
@pytest.mark.parametrize(
    "sharing,strategy",
    [
        ("", "none"),
        ("sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n", "time-slicing"),
        ("sharing:\n  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n", "mps"),
        (
            "sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 4}\n"
            "  mps:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 2}\n",
            "mps",
        ),
    ],
)
def test_the_active_sharing_strategy_is_the_plugins(sharing, strategy):
    from brickadmin.cluster import vocabulary as vocab

    assert vocab.active_sharing_strategy("version: v1\n" + sharing) == strategy


# api/config/v1/config_test.go TestNewConfigDefaultsMPSFailRequestsGreaterThanOne and
# TestNewConfigHonorsExplicitMPSFailRequestsGreaterThanOneFalse; a time-slicing section's unset
# value stays false (NewConfig defaults only the MPS one).
@pytest.mark.parametrize(
    "config,fails",
    [
        ("version: v1\n" + MPS.format(extra=""), True),
        ("version: v1\n" + MPS.format(extra="    failRequestsGreaterThanOne: false\n"), False),
        ("version: v1\n" + MPS.format(extra="").replace("mps:", "timeSlicing:"), False),
        (
            "version: v1\n"
            + MPS.format(extra="    failRequestsGreaterThanOne: true\n").replace("mps:", "timeSlicing:"),
            True,
        ),
    ],
)
def test_mps_refuses_more_than_one_replica_per_container_unless_told_otherwise(config, fails):
    from brickadmin.cluster import vocabulary as vocab

    assert vocab.fail_requests_greater_than_one(config) is fails


# internal/rm/rm_test.go TestValidateRequest, the rows about sharing (the others check that the
# device ids asked for are known, which the kubelet's allocation decides here). The test builds
# its Config by hand, so "MPS with two devices" leaves failRequestsGreaterThanOne unset.
@pytest.mark.parametrize(
    "strategy,fail,requested,refused",
    [
        ("none", None, 1, False),  # valid device IDs -- no sharing
        ("time-slicing", None, 1, False),  # timeslicing with single device
        ("time-slicing", None, 2, False),  # timeslicing with two devices
        ("time-slicing", True, 2, True),  # timeslicing with two devices -- failRequestsGreaterThanOne
        ("mps", None, 1, False),  # MPS with single device
        ("mps", None, 2, False),  # MPS with two devices
        ("mps", True, 2, True),  # MPS with two devices -- failRequestsGreaterThanOne
    ],
)
def test_the_plugin_validates_a_request_as_its_resource_manager_does(strategy, fail, requested, refused):
    from brickadmin.cluster import vocabulary as vocab

    said = vocab.validate_request(strategy, fail, requested, replicas=strategy != "none")
    assert bool(said) is refused
    if refused:
        assert said == f"invalid request: maximum request size for shared resources is 1; found {requested}"


def test_a_plugin_started_with_an_mps_config_refuses_two_replicas_in_one_container():
    from brickadmin.cluster import vocabulary as vocab

    config = "version: v1\nflags:\n  mpsRoot: /run/nvidia/mps\n" + MPS.format(extra="")
    assert vocab.request_error(config, 2, replicas=True).endswith("found 2")
    assert vocab.request_error(config, 1, replicas=True) == ""
    relaxed = config.replace("  mps:\n", "  mps:\n    failRequestsGreaterThanOne: false\n")
    assert vocab.request_error(relaxed, 2, replicas=True) == ""


# cmd/mps-control-daemon/mps/device_test.go TestDevice
@pytest.mark.parametrize(
    "capability,replicas,volta,most,refused",
    [
        ("v7.5", 0, True, 48, False),  # leading v ignored
        ("7.5", 0, True, 48, False),  # no-leading v supported
        ("7.0", 0, False, 16, False),  # pre-volta clients
        ("9.0", 0, True, 48, False),  # post-volta clients
        ("7.0", 29, False, 16, True),  # pre-volta clients exceeded
        ("9.0", 49, True, 48, True),  # post-volta clients exceeded
        ("7.0", 16, False, 16, False),  # pre-volta clients max
        ("9.0", 48, True, 48, False),  # post-volta clients max
    ],
)
def test_an_mps_server_takes_a_bounded_number_of_clients_per_gpu(capability, replicas, volta, most, refused):
    from brickadmin.cluster import vocabulary as vocab

    assert vocab.is_at_least_volta(capability) is volta
    assert vocab.mps_max_clients(capability) == most
    said = vocab.mps_replicas_error(capability, replicas)
    assert bool(said) is refused
    if refused:
        assert said == f"invalid device maximum allowed replicas exceeded: {replicas} > {most}"
