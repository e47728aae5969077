"""Which of a namespace's ResourceQuotas count a pod's GPUs (brickadmin/cluster/quotascope.py):
the scopes as Kubernetes matches them, and what an approved Workspace's quota counts."""

import pytest

from brickadmin.cluster import quotascope as qs

# Upstream: kubernetes/kubernetes pkg/quota/v1/evaluator/core/pods_test.go,
# TestPodEvaluatorMatchingScopes: (pod spec, the selectors it matches of the default list).
DEFAULT_SELECTORS = [
    {"scopeName": "Terminating"},
    {"scopeName": "NotTerminating"},
    {"scopeName": "BestEffort"},
    {"scopeName": "NotBestEffort"},
    {"scopeName": "PriorityClass", "operator": "In", "values": ["class1"]},
    {"scopeName": "CrossNamespacePodAffinity"},
]
NOT_BEST_EFFORT_CONTAINER = {
    "resources": {
        "requests": {"cpu": "1", "memory": "50M", "example.com/dongle": "1"},
        "limits": {"cpu": "2", "memory": "100M", "example.com/dongle": "1"},
    }
}
AFFINITY_TERM = {"labelSelector": {}}
MATCHING_SCOPES = {
    "EmptyPod": ({}, ["NotTerminating", "BestEffort"]),
    "PriorityClass": ({"priorityClassName": "class1"}, ["NotTerminating", "BestEffort", "PriorityClass"]),
    "NotBestEffort": ({"containers": [NOT_BEST_EFFORT_CONTAINER]}, ["NotTerminating", "NotBestEffort"]),
    "Terminating": ({"activeDeadlineSeconds": 30}, ["Terminating", "BestEffort"]),
    "CrossNamespaceRequiredAffinity": (
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {**AFFINITY_TERM, "namespaces": ["ns1"], "namespaceSelector": {}}
                    ]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
    "CrossNamespaceRequiredAffinityWithSlice": (
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{**AFFINITY_TERM, "namespaces": ["ns1"]}]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
    "CrossNamespacePreferredAffinity": (
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"podAffinityTerm": {**AFFINITY_TERM, "namespaces": ["ns2"], "namespaceSelector": {}}}
                    ]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
    "CrossNamespacePreferredAffinityWithSelector": (
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"podAffinityTerm": {**AFFINITY_TERM, "namespaceSelector": {}}}
                    ]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
    "CrossNamespacePreferredAntiAffinity": (
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"podAffinityTerm": {**AFFINITY_TERM, "namespaceSelector": {}}}
                    ]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
    "CrossNamespaceRequiredAntiAffinity": (
        {
            "activeDeadlineSeconds": 30,
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{**AFFINITY_TERM, "namespaces": ["ns3"]}]
                }
            },
        },
        ["Terminating", "BestEffort", "CrossNamespacePodAffinity"],
    ),
}


@pytest.mark.parametrize("spec,want", MATCHING_SCOPES.values(), ids=MATCHING_SCOPES.keys())
def test_the_scopes_a_pod_matches_as_kubernetes_matches_them(spec, want):
    facts = qs.pod_facts({"spec": spec})
    assert [s["scopeName"] for s in DEFAULT_SELECTORS if qs.matches_scope(s, facts)] == want


def rl(cpu="", memory="", **more):
    out = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {**out, **{k.replace("_", "-"): v for k, v in more.items()}}


def c(requests, limits):
    return {"resources": {"requests": requests, "limits": limits}}


# Upstream: kubernetes/kubernetes pkg/apis/core/v1/helper/qos/qos_test.go, TestComputePodQOS
# (the rows without pod-level resources): (containers, init containers, class).
QOS = {
    "guaranteed": ([c(rl("100m", "100Mi"), rl("100m", "100Mi"))], [], "Guaranteed"),
    "guaranteed-guaranteed": ([c(rl("100m", "100Mi"), rl("100m", "100Mi"))] * 2, [], "Guaranteed"),
    "best-effort-best-effort": ([c(rl(), rl())] * 2, [], "BestEffort"),
    "best-effort": ([c(rl(), rl())], [], "BestEffort"),
    "best-effort-burstable": ([c(rl(), rl()), c(rl("1"), rl("2"))], [], "Burstable"),
    "best-effort-guaranteed": ([c(rl(), rl()), c(rl("10m", "100Mi"), rl("10m", "100Mi"))], [], "Burstable"),
    "burstable-cpu-guaranteed-memory": ([c(rl(memory="100Mi"), rl(memory="100Mi"))], [], "Burstable"),
    "burstable-no-limits": ([c(rl("100m", "100Mi"), rl())], [], "Burstable"),
    "burstable-guaranteed": (
        [c(rl("1", "100Mi"), rl("2", "100Mi")), c(rl("100m", "100Mi"), rl("100m", "100Mi"))],
        [],
        "Burstable",
    ),
    "burstable-unbounded-but-requests-match-limits": (
        [c(rl("100m", "100Mi"), rl("200m", "200Mi")), c(rl("100m", "100Mi"), rl())],
        [],
        "Burstable",
    ),
    "burstable-1": ([c(rl("10m", "100Mi"), rl("100m", "200Mi"))], [], "Burstable"),
    "burstable-2": ([c(rl("0", "0"), rl("100m", "200Mi"))], [], "Burstable"),
    "best-effort-hugepages": (
        [c(rl("0", "0", hugepages_2Mi="1Gi"), rl("0", "0", hugepages_2Mi="1Gi"))],
        [],
        "BestEffort",
    ),
    "init-container": ([c(rl(), rl())], [c(rl("10m", "100Mi"), rl("100m", "200Mi"))], "Burstable"),
}


@pytest.mark.parametrize("containers,init,want", QOS.values(), ids=QOS.keys())
def test_the_qos_class_as_kubernetes_computes_it(containers, init, want):
    assert qs.qos_class({"containers": containers, "initContainers": init}) == want


def test_a_gpu_alone_leaves_a_pod_best_effort_and_a_limit_alone_is_its_request():
    assert qs.qos_class({"containers": [c({}, {"nvidia.com/gpu": "1"})]}) == "BestEffort"
    # the API server defaults a missing request to the limit before it computes the class
    assert qs.qos_class({"containers": [c({}, rl("1", "1Gi"))]}) == "Guaranteed"


@pytest.mark.parametrize(
    "klass, operator, values, matches",
    [
        ("", "NotIn", ["brick-job-priority"], True),  # no class: no PriorityClass key, NotIn holds
        ("brick-user-priority", "NotIn", ["brick-job-priority"], True),
        ("brick-job-priority", "NotIn", ["brick-job-priority"], False),
        ("", "In", ["brick-job-priority"], False),
        ("brick-job-priority", "In", ["brick-job-priority", "other"], True),
        ("", "Exists", [], False),
        ("x", "Exists", [], True),
        ("", "DoesNotExist", [], True),
        ("x", "DoesNotExist", [], False),
    ],
)
def test_a_priority_class_selector(klass, operator, values, matches):
    facts = qs.pod_facts({"spec": {"priorityClassName": klass} if klass else {}})
    selector = {"scopeName": "PriorityClass", "operator": operator, "values": values}
    assert qs.matches_scope(selector, facts) is matches


def test_the_qos_class_the_api_server_wrote_wins_over_the_spec():
    assert qs.pod_facts({"spec": {}, "status": {"qosClass": "Burstable"}})["best_effort"] is False
    assert qs.pod_facts({"spec": {"containers": [NOT_BEST_EFFORT_CONTAINER]}})["best_effort"] is False


def test_the_watchers_projection_keeps_what_the_scopes_read():
    from brickadmin.cluster import projection

    cross = {"namespaces": ["other"], "labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}
    pod = {
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {
            "priorityClassName": "brick-job-priority",
            "activeDeadlineSeconds": 60,
            "affinity": {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [cross, {"topologyKey": "z"}]}
            },
            "containers": [c(rl("1", "1Gi"), rl("2", "2Gi") | {"nvidia.com/gpu": "1"})],
        },
        "status": {"phase": "Running"},
    }
    slim = projection.pod(pod)
    assert slim["status"]["qosClass"] == "Burstable"  # computed: the slim containers keep no cpu or memory
    assert slim["spec"]["affinity"] == {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"namespaces": ["other"]}]}
    }
    assert (
        qs.pod_facts(slim)
        == qs.pod_facts(pod)
        == {
            "priority_class": "brick-job-priority",
            "terminating": True,
            "best_effort": False,
            "cross_namespace_affinity": True,
        }
    )


def test_scopes_and_the_scope_selector_are_one_list():
    spec = {
        "scopes": ["NotTerminating"],
        "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["a"]}]},
    }
    assert qs.scope_selectors(spec) == [
        {"scopeName": "NotTerminating", "operator": "Exists", "values": []},
        {"scopeName": "PriorityClass", "operator": "In", "values": ["a"]},
    ]


# What an approval writes (workspaces/approvals.py workspace_manifests): the compute quota names
# the approved GPU resource only, scoped to every pod but the product's Jobs.
WORKSPACE_SCOPE = [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["brick-job-priority"]}]


def workspace_quotas(resource="nvidia.com/gpu.shared", amount="1"):
    return [
        qs.quota_scope(
            "workspace-compute",
            {"requests.cpu": "2", "requests.memory": "8Gi", f"requests.{resource}": amount},
            WORKSPACE_SCOPE,
        ),
        qs.quota_scope("workspace-storage", {"requests.storage": "20Gi"}, []),
    ]


def facts(priority_class=""):
    return qs.pod_facts({"spec": {"priorityClassName": priority_class} if priority_class else {}})


def test_a_pod_asking_for_the_approved_resource_is_counted():
    (c,) = qs.counting({"nvidia.com/gpu.shared": 1}, facts("brick-user-priority"), workspace_quotas())
    assert (c.verdict, c.quotas, c.capped) == (qs.COUNTED, ("workspace-compute",), ("nvidia.com/gpu.shared",))
    (c,) = qs.counting({"nvidia.com/gpu.shared": 1}, facts(), workspace_quotas())  # no class: counted too
    assert c.verdict == qs.COUNTED


def test_another_gpu_resource_is_not_capped_whatever_the_pods_priority():
    for klass in ("", "brick-user-priority", "brick-job-priority"):
        (c,) = qs.counting({"nvidia.com/gpu": 2}, facts(klass), workspace_quotas())
        assert (c.verdict, c.amount, c.capped) == (qs.NOT_CAPPED, 2, ("nvidia.com/gpu.shared",))


def test_a_job_asking_for_the_approved_resource_is_left_out_by_the_scope():
    (c,) = qs.counting({"nvidia.com/gpu": 1}, facts("brick-job-priority"), workspace_quotas("nvidia.com/gpu"))
    assert (c.verdict, c.quotas) == (qs.OUT_OF_SCOPE, ("workspace-compute",))
    assert c.left_out_by == WORKSPACE_SCOPE[0]


def test_a_resource_capped_at_zero_is_counted_and_one_quota_in_scope_is_enough():
    quotas = [
        *workspace_quotas(),
        qs.quota_scope("no-exclusive", {"requests.nvidia.com/gpu": "0"}, []),
    ]
    lines = qs.counting({"nvidia.com/gpu": 1, "nvidia.com/gpu.shared": 1}, facts("brick-job-priority"), quotas)
    assert [(c.resource, c.verdict, c.quotas) for c in lines] == [
        ("nvidia.com/gpu", qs.COUNTED, ("no-exclusive",)),
        ("nvidia.com/gpu.shared", qs.OUT_OF_SCOPE, ("workspace-compute",)),
    ]
    assert qs.uncounted(lines) == 1


def test_without_a_gpu_quota_nothing_is_capped():
    (c,) = qs.counting({"nvidia.com/gpu": 1}, facts(), [qs.quota_scope("cpu-only", {"requests.cpu": "1"}, [])])
    assert (c.verdict, c.capped) == (qs.NOT_CAPPED, ())
