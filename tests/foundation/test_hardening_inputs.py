"""Posted values and queries that crashed a view (500) or were dropped without a word,
and a managed manifest that applied any document it held."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
import yaml
from django.test import Client
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


@pytest.mark.parametrize(
    "content,reason",
    [
        ("[" * 1000, "nested more than"),
        ("{a: " * 1000, "nested more than"),
        ("- " * 200 + "x", "nested more than"),
        ("kind: X\nmetadata: abc\n", "has no kind or metadata.name"),
    ],
)
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

NODE_DOC = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": NODE, "labels": {"brick.cloud/gpu.sharing": "timeslicing"}},
}
QUOTA_DOC = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "workspace-quota", "namespace": "ws-exclusive"},
    "spec": {"hard": {"requests.nvidia.com/gpu": "64"}},
}
FOREIGN_CM = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "coredns", "namespace": "kube-system"},
    "data": {"Corefile": "."},
}


def _with(extra):
    return manifest.current().content.rstrip("\n") + "\n---\n" + yaml.safe_dump(extra)


def _cluster_state(twin):
    node = twin.get_node(NODE)
    quota = next(q for q in twin.list_resource_quotas("ws-exclusive") if q["metadata"]["name"] == "workspace-quota")
    return copy.deepcopy(node["metadata"]["labels"]), copy.deepcopy(quota["spec"])


@pytest.mark.parametrize(
    "extra,kind,name",
    [(NODE_DOC, "Node", NODE), (QUOTA_DOC, "ResourceQuota", "workspace-quota"), (FOREIGN_CM, "ConfigMap", "coredns")],
)
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


# --- control characters and overlong queries: one 400 page for every page ----------------


def _world(load_scenario, admin_user, alice, bob):
    from .pages import admin_pages, build_world, user_pages

    ids = build_world(load_scenario, admin_user, alice, bob)
    return admin_pages(ids), user_pages(ids)


def _with_query(path: str, query: str) -> str:
    return path + ("&" if "?" in path else "?") + query


@pytest.mark.slow  # every page and export, each with a NUL: a fuzzing sweep
def test_a_nul_in_any_page_s_query_or_export_is_a_400_saying_so(load_scenario, admin_user, alice, bob):
    """Every page of the console (tests/foundation/pages.py, so pages added there are covered),
    as a search, an export and an extra parameter: a NUL made PostgreSQL fail the query (500)
    and cut a CSV export off mid-download."""
    admin_pages, user_pages = _world(load_scenario, admin_user, alice, bob)
    for user, pages in ((admin_user, admin_pages), (alice, user_pages)):
        client = Client()
        client.force_login(user)
        for page in pages:
            for query in ("q=%00", "q=%00&format=csv", "format=csv&sort=a%00", "node=x%01y", "a%00=1"):
                r = client.get(_with_query(page.path, query))
                assert r.status_code == 400, (page.path, query, r.status_code)
                html = page_text(r)
                assert "Request refused" in html and "holds a control character (such as a NUL byte)" in html


def test_the_jobs_search_with_a_nul_says_which_parameter(alice_client):
    r = alice_client.get("/workspaces/jobs/?q=%00")
    assert r.status_code == 400
    assert "The query parameter &#x27;q&#x27; holds a control character (such as a NUL byte)." in page_text(r)
    assert alice_client.get("/workspaces/jobs/?q=gpu").status_code == 200  # the search itself works


def test_a_nul_in_the_address_or_a_form_field_is_refused_and_nothing_is_saved(twin, alice_client):
    assert alice_client.get("/nodes/dev-a1-ws04%00/").status_code == 400
    r = alice_client.post(
        reverse("workspace_request"),
        {"name": "team\x00x", "gpu": "1", "cpu": "1", "memory_gib": "1", "storage_gib": "1"},
    )
    assert r.status_code == 400  # posted: the form says so beside the field, what was typed kept
    assert 'id="err-name"' in page_text(r) and "Null characters are not allowed." in page_text(r)
    from workspaces.models import WorkspaceRequest

    assert not WorkspaceRequest.objects.exists()
    # tabs and line breaks are text (a text area holds them): not refused
    assert alice_client.get("/workspaces/jobs/?q=a%09b").status_code == 200


def test_an_overlong_query_parameter_is_a_400_not_a_dead_database(admin_client):
    r = admin_client.get(reverse("run_list"), {"actor": "a" * 50_000})
    assert r.status_code == 400
    assert "The query parameter &#x27;actor&#x27; is longer than 1000 characters." in page_text(r)
    assert admin_client.get(reverse("run_list"), {"actor": "a" * 1000}).status_code == 200


# --- the manifest: bounded and linear -------------------------------------------------------


def test_a_manifest_of_forty_thousand_documents_is_refused_by_its_size(twin, admin_client):
    content = "a: 1\n---\n" * 40_000 + "a: 1"  # 360,004 characters: the 1.5 MB post's shape
    r = admin_client.post(reverse("manifest_save"), {"content": content, "note": ""})
    assert r.status_code == 400
    assert (
        f"The manifest is {len(content)} characters long; at most {manifest.MAX_CHARACTERS} are accepted"
        in page_text(r)
    )
    assert manifest.current().version == 1


def test_a_manifest_of_more_documents_than_the_bound_says_the_bound(twin, admin_client):
    content = (
        manifest.current().content.rstrip("\n")
        + "\n---\n"
        + "---\n".join(
            yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "x"}})
            for i in range(manifest.MAX_DOCUMENTS)
        )
    )
    r = admin_client.post(reverse("manifest_save"), {"content": content, "note": ""})
    assert r.status_code == 400
    assert f"The manifest holds more than {manifest.MAX_DOCUMENTS} documents" in page_text(r)
    assert manifest.current().version == 1


@pytest.mark.slow  # 10,000 documents through the pure-Python YAML reader
def test_validation_names_each_repeated_document_once_however_many_there_are():
    base = manifest.parse(manifest.MANIFEST_FILE.read_text())
    many = base * 2500  # 17,500 documents, each name 2,500 times
    errors = [e for e in manifest.validate(many).errors if "more than once" in e]
    assert len(errors) == len(base) == 7
    assert "ConfigMap nvidia-device-plugin-config-default appears more than once." in errors


# --- the device plugin's own config.yaml: the same limits ----------------------------------

BILLION_LAUGHS = (
    "version: v1\n"
    + "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9))
)


def _with_config(key: str, text: str) -> str:
    docs = list(yaml.safe_load_all(manifest.current().content))
    for d in docs:
        if d["metadata"]["name"] == manifest.TS_CONFIGMAP:
            d["data"][key] = text
    return yaml.safe_dump_all(docs)


@pytest.mark.parametrize(
    "key,text,why",
    [
        ("config.yaml", BILLION_LAUGHS, "too large (more than 100000 values once aliases are expanded)"),
        ("config.yaml", "version: v1\nflags: " + "{a: " * 60 + "1" + "}" * 60, "nested more than 40 levels deep"),
        ("other.yaml", BILLION_LAUGHS, "too large (more than 100000 values once aliases are expanded)"),
    ],
)
def test_a_billion_laughs_config_inside_the_configmap_is_refused(twin, admin_client, key, text, why):
    before = copy.deepcopy(twin.get_configmap(manifest.NAMESPACE, manifest.TS_CONFIGMAP)["data"])
    content = _with_config(key, text)
    r = admin_client.post(reverse("manifest_save"), {"content": content, "note": ""})
    assert r.status_code == 400
    assert f"ConfigMap {manifest.TS_CONFIGMAP}, {key}: {why}; the device plugin would parse it as it is." in page_text(
        r
    )
    assert manifest.current().version == 1
    # a version stored before the rule is refused at apply: the plugin never receives it
    ManifestVersion.objects.create(version=2, content=content, actor_name="old")
    admin_client.post(reverse("manifest_apply"))
    assert twin.get_configmap(manifest.NAMESPACE, manifest.TS_CONFIGMAP)["data"] == before


# --- smaller ones ---------------------------------------------------------------------------


def test_signed_in_pages_and_exports_are_never_stored(twin, admin_client):
    for path in ("/", "/workspaces/jobs/", "/workspaces/jobs/?format=csv", "/lockouts/?format=csv", "/nodes/"):
        r = admin_client.get(path)
        assert r.status_code == 200 and "no-store" in r["Cache-Control"], path


def test_a_session_ends_after_eight_idle_hours_and_a_request_restarts_the_count(alice, client):
    from django.contrib.sessions.models import Session
    from django.utils import timezone

    r = client.post(reverse("login"), {"username": "alice", "password": "pw-alice-123"})
    assert r.cookies["sessionid"]["max-age"] == 8 * 3600
    Session.objects.update(expire_date=timezone.now() + timedelta(minutes=5))  # seven hours 55 idle
    r = client.get("/workspaces/")
    assert r.cookies["sessionid"]["max-age"] == 8 * 3600  # sent again: the eight hours start over
    assert Session.objects.get().expire_date > timezone.now() + timedelta(hours=7, minutes=59)


def test_a_404_names_neither_the_resolver_nor_a_model(alice_client, settings):
    settings.DEBUG = False
    for path in ("/no-such-page/", "/workspaces/999999/", "/workspaces/jobs/999999/"):
        r = alice_client.get(path)
        assert r.status_code == 404
        html = page_text(r)
        assert "There is nothing at this address" in html
        for internal in ("Resolver404", "WorkspaceRequest", "WorkspaceJob", "matches the given query", "tried"):
            assert internal not in html, (path, internal)


@pytest.mark.django_db(transaction=True)
def test_ten_concurrent_cancel_clicks_record_one_cancel_request(twin, admin_user):
    import threading

    from django.db import connection
    from django.test import Client as BrowserClient

    from gpus.models import RunStatus, StepRun
    from gpus.procedures import service

    run = service.start_run("A", NODE, {}, actor_name="root", dispatch=False)
    ProcedureRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)  # a worker has it
    start = threading.Barrier(10)
    answers = []

    def click():
        try:
            browser = BrowserClient()
            browser.force_login(admin_user)
            start.wait()
            answers.append(browser.post(reverse("run_cancel", args=[run.pk])).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=click) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [302] * 10
    assert StepRun.objects.filter(run=run, title__startswith="Cancel requested").count() == 1
    assert ProcedureRun.objects.get(pk=run.pk).cancel_requested


def test_a_limit_for_a_user_named_in_other_digits_is_refused_not_given_to_another(twin, admin_client, alice, bob):
    arabic = str(bob.pk).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    fullwidth = str(bob.pk).translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    for value in (arabic, fullwidth):
        r = admin_client.post(
            reverse("limit_save"), {"user": value, "gpu": "3", "cpu": "5", "memory_gib": "7", "storage_gib": "11"}
        )
        assert r.status_code == 400 and 'class="errorlist' in page_text(r)
    assert not ResourceLimit.objects.exists()
    r = admin_client.post(
        reverse("limit_save"), {"user": str(bob.pk), "gpu": "3", "cpu": "5", "memory_gib": "7", "storage_gib": "11"}
    )
    assert r.status_code == 302 and ResourceLimit.objects.get().user == bob


def _csv(client, path, **query):
    import csv
    import io

    r = client.get(path, {**query, "format": "csv"})
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))


def test_workspaces_and_all_workspaces_export_csv_like_the_other_lists(twin, admin_user, alice, bob):
    from workspaces import approvals

    approvals.approve(
        approvals.create_request(alice, name="team-a", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "nvidia.com/gpu.shared",
        overcommit=True,
    )
    approvals.reject(
        approvals.create_request(bob, name="team-b", gpu=1, cpu=2, memory_gib=8, storage_gib=20).pk,
        admin_user,
        "=no budget",
    )
    mine = Client()
    mine.force_login(alice)
    rows = _csv(mine, "/workspaces/")
    assert [(r["name"], r["status"], r["resource"]) for r in rows] == [("team-a", "Approved", "nvidia.com/gpu.shared")]
    admin = Client()
    admin.force_login(admin_user)
    rows = _csv(admin, "/workspaces/all/", sort="name")
    assert [(r["name"], r["owner"], r["decided_by"]) for r in rows] == [
        ("team-a", "alice", "root"),
        ("team-b", "bob", "root"),
    ]
    assert rows[1]["rejection"] == "'=no budget"  # never a formula
    assert [r["name"] for r in _csv(admin, "/workspaces/all/", status="rejected")] == ["team-b"]
    assert [r["name"] for r in _csv(admin, "/workspaces/all/", q="team-a")] == ["team-a"]
    assert mine.get("/workspaces/all/", {"format": "csv"}).status_code == 403
