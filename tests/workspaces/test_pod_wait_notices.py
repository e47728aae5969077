"""An owner is told why a GPU pod of theirs waits or was refused: once per cause however often
the cluster is read, in their language, linking to the cause on their Workspace page; a pod the
kubelet refused is told to the admins too, as the owner's page says."""

import pytest
from django.urls import reverse

from brickadmin.accounts.models import Notification, Preference
from workspaces import waits

from .test_pod_waits import record

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(load_scenario):
    return load_scenario("waiting")


def test_the_owner_is_told_once_per_cause_and_the_admins_of_a_refused_pod(waiting, alice, admin_user, login):
    ws = record(alice, "ws-train")
    Preference.objects.update_or_create(user=alice, defaults={"ui_language": "ko"})
    told = waits.tell_owners()
    notes = {n.link: n for n in Notification.objects.filter(recipient=alice, kind="pod-wait")}
    page = reverse("workspace_detail", args=[ws.pk])
    taint = notes[f"{page}#wait-taint-train-4gpu"]
    assert taint.subject == "Workspace ws-train의 파드 train-4gpu이(가) 대기 중입니다"  # in alice's language
    assert taint.body.startswith("Pod train-4gpu이(가) nvidia.com/gpu 4개를 기다립니다")  # the cause, then the remedy
    assert f"{page}#wait-admission-old-eval" in notes and f"{page}#wait-container-notebook" in notes
    refused = Notification.objects.get(recipient=admin_user, kind="pod-refused")
    assert refused.subject == "Pod old-eval of Workspace ws-train was refused"
    assert refused.link == reverse("cluster_workspace", args=["ws-train"]) + "#wait-admission-old-eval"
    assert "Allocate failed due to requested number of devices unavailable" in refused.body
    assert told == len(notes) + 1
    # the cluster read again: the same causes are not told again
    assert waits.tell_owners() == 0
    assert Notification.objects.filter(recipient=alice, kind="pod-wait").count() == len(notes)
    # the link lands on the cause
    html = login(alice).get(page).content.decode()
    assert 'id="wait-taint-train-4gpu"' in html


def test_a_namespace_without_an_approved_workspace_tells_no_one(waiting, alice):
    assert waits.tell_owners() == 0
    assert not Notification.objects.filter(kind__in=("pod-wait", "pod-refused")).exists()
