"""gpu_sharing conformance evidence, from the cluster, for either convention."""

from django.urls import reverse


def test_qks_evidence_matches_the_seed(admin_client, load_scenario):
    load_scenario("qks")
    html = admin_client.get(reverse("evidence")).content.decode()
    assert "time-slicing, MIG" in html
    assert "kubectl get node qcs07 -o jsonpath=&quot;{.status.allocatable}&quot;" in html
    assert "&quot;nvidia.com/mig-1g.24gb&quot;:&quot;4&quot;" in html
    assert "kubectl get cm device-plugin-configs -n gpu-operator" in html
    assert "5 logical GPUs advertised on 1 physical" in html
    assert "1g.24gb ×3, 4g.96gb ×1 held by running pods" in html


def test_brick_evidence_and_markdown_download(admin_client, twin):
    resp = admin_client.get(reverse("evidence"), {"format": "md"})
    assert resp["Content-Disposition"].startswith('attachment; filename="gpu_sharing-evidence-')
    text = resp.content.decode()
    assert "- At least one GPU sharing strategy: yes (time-slicing)" in text
    assert "- Hardware partitions exposed as schedulable resources: no" in text
    assert 'kubectl get node dev-a1-ws02 -o jsonpath="{.status.allocatable.nvidia\\.com/gpu\\.shared}"\n2' in text


def test_users_cannot_see_evidence(alice_client, twin):
    assert alice_client.get(reverse("evidence")).status_code == 403


def test_the_evidence_page_reads_in_the_readers_language_and_its_download_in_english(admin_client, load_scenario):
    load_scenario("qks")
    admin_client.cookies["django_language"] = "ko"
    korean = admin_client.get(reverse("evidence"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "노드별 공유 방식" in korean and "Sharing strategy per node" not in korean
    assert "1g.24gb ×3, 4g.96gb ×1을(를) 실행 중인 Pod가 사용 중입니다." in korean
    markdown = admin_client.get(reverse("evidence"), {"format": "md"}, HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert "## 1. Sharing strategy per node" in markdown and "노드별" not in markdown
