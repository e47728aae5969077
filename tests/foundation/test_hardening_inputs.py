"""Posted values that crashed a view (500) or were dropped without a word,
and a managed manifest that applied any document it held."""
from __future__ import annotations

import copy

import pytest
import yaml
from django.urls import reverse

from gpus import manifest
from gpus.models import ManifestVersion, ProcedureRun
from workspaces.models import ResourceLimit

pytestmark = pytest.mark.django_db

NODE = "dev-a1-ws04"


def page_text(resp) -> str:
    return resp.content.decode()


# --- the limits form (limit_save) -----------------------------------------------------

@pytest.mark.parametrize("field", ["user", "group"])
@pytest.mark.parametrize("value", ["²", "9" * 30, "٣", "1" * 19])
def test_limit_with_unicode_digits_or_huge_numbers_is_a_form_error(twin, admin_client, field, value):
    data = {"gpu": "3", "cpu": "5", "memory_gib": "7", "storage_gib": "11", field: value}
    r = admin_client.post(reverse("limit_save"), data)
    assert r.status_code == 400
    html = page_text(r)
    assert 'class="errorlist' in html
    for typed in ("3", "5", "7", "11"):  # what was typed is still in the form
        assert f'value="{typed}"' in html
    assert not ResourceLimit.objects.exists()


# --- the managed manifest: deeply nested YAML, and a note over 300 characters ---------

@pytest.mark.parametrize("content,reason", [
    ("[" * 1000, "nested more than"),
    ("{a: " * 1000, "nested more than"),
    ("- " * 200 + "x", "nested more than"),
    ("kind: X\nmetadata: abc\n", "has no kind or metadata.name"),
])
def test_manifest_save_of_hostile_yaml_is_a_form_error_keeping_the_text(twin, admin_client, content, reason):
    r = admin_client.post(reverse("manifest_save"), {"content": content, "note": "my note"})
    assert r.status_code == 400
    html = page_text(r)
    assert 'id="err-content"' in html and reason in html
    assert 'value="my note"' in html  # the note typed is kept
    assert content[:50] in html  # so is the content
    assert manifest.current().version == 1


def test_a_config_yaml_nested_too_deep_is_a_validation_error(twin, admin_client):
    docs = list(yaml.safe_load_all(manifest.current().content))
    for d in docs:
        if d["metadata"]["name"] == manifest.TS_CONFIGMAP:
            d["data"]["config.yaml"] = "[" * 1000
    r = admin_client.post(reverse("manifest_save"), {"content": yaml.safe_dump_all(docs), "note": ""})
    assert r.status_code == 400 and "config.yaml is not valid YAML" in page_text(r)
    assert manifest.current().version == 1


def test_manifest_note_over_300_characters_says_why_and_keeps_the_text(twin, admin_client):
    content = manifest.current().content.replace("replicas: 2", "replicas: 3")
    r = admin_client.post(reverse("manifest_save"), {"content": content, "note": "n" * 301})
    assert r.status_code == 400
    html = page_text(r)
    assert 'id="err-note"' in html and "at most 300 characters" in html
    assert "n" * 301 in html and "replicas: 3" in html
    assert manifest.current().version == 1


# --- the managed manifest holds only the device plugin's objects -----------------------

NODE_DOC = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": NODE, "labels": {"brick.cloud/gpu.sharing": "timeslicing"}}}
QUOTA_DOC = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "workspace-quota", "namespace": "ws-exclusive"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "64"}}}
FOREIGN_CM = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "coredns", "namespace": "kube-system"}, "data": {"Corefile": "."}}


def _with(extra):
    return manifest.current().content.rstrip("\n") + "\n---\n" + yaml.safe_dump(extra)


def _cluster_state(twin):
    node = twin.get_node(NODE)
    quota = next(q for q in twin.list_resource_quotas("ws-exclusive") if q["metadata"]["name"] == "workspace-quota")
    return copy.deepcopy(node["metadata"]["labels"]), copy.deepcopy(quota["spec"])


@pytest.mark.parametrize("extra,kind,name", [(NODE_DOC, "Node", NODE), (QUOTA_DOC, "ResourceQuota", "workspace-quota"),
                                             (FOREIGN_CM, "ConfigMap", "coredns")])
def test_saving_a_foreign_document_is_refused_by_kind_and_name(twin, admin_client, extra, kind, name):
    before = _cluster_state(twin)
    r = admin_client.post(reverse("manifest_save"), {"content": _with(extra), "note": "sneaky"})
    assert r.status_code == 400
    html = page_text(r)
    assert f"{kind} {name}" in html and "is not allowed" in html
    assert manifest.current().version == 1
    admin_client.post(reverse("manifest_apply"))
    assert _cluster_state(twin) == before


@pytest.mark.parametrize("extra,kind,name", [(NODE_DOC, "Node", NODE), (QUOTA_DOC, "ResourceQuota", "workspace-quota")])
def test_a_stored_version_with_a_foreign_document_is_not_applied(twin, admin_client, extra, kind, name):
    """A version saved before the rule (straight into the table) is refused at apply."""
    before = _cluster_state(twin)
    cur = manifest.current()
    ManifestVersion.objects.create(version=cur.version + 1, content=_with(extra), actor_name="old")
    r = admin_client.post(reverse("manifest_apply"), follow=True)
    html = page_text(r)
    assert f"{kind} {name}" in html and "is not allowed" in html
    assert _cluster_state(twin) == before
    with pytest.raises(manifest.ManifestError, match=f"{kind} {name}"):
        manifest.apply(manifest.parse(_with(extra)), twin)  # the function refuses too, before any write
    assert _cluster_state(twin) == before


def test_a_plugin_document_in_another_namespace_or_api_is_refused():
    content = manifest.MANIFEST_FILE.read_text()
    base = manifest.parse(content)
    assert manifest.validate(base).ok
    moved = copy.deepcopy(base)
    moved[0]["metadata"]["namespace"] = "kube-system"
    assert any("is not allowed" in e and "kube-system" in e for e in manifest.validate(moved).errors)
    odd_api = copy.deepcopy(base)
    odd_api[2]["apiVersion"] = "extensions/v1beta1"
    assert any("is not allowed" in e for e in manifest.validate(odd_api).errors)
    twice = base + [copy.deepcopy(base[0])]
    assert any("more than once" in e for e in manifest.validate(twice).errors)


# --- starting a procedure ---------------------------------------------------------------

def test_start_with_an_invalid_form_says_why_on_the_pick_page(twin, admin_client):
    r = admin_client.post(reverse("wizard_start", args=["A"]), {"node": "no-such-node"})
    assert r.status_code == 400
    html = page_text(r)
    assert "Not started" in html and "This procedure does not apply to that node." in html
    assert not ProcedureRun.objects.exists()


def test_start_while_the_cluster_is_unreachable_says_so(twin, admin_client, unreachable):  # noqa: F811
    r = admin_client.post(reverse("wizard_start", args=["A"]), {"node": NODE})
    assert r.status_code == 503
    html = page_text(r)
    assert "Not started: the cluster cannot be reached" in html and f"127.0.0.1:{unreachable}" in html
    assert not ProcedureRun.objects.exists()
