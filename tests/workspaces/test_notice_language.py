"""What the owner's Workspace page and the admin's detail say to the owner (a question before
reclaiming, the owner's answer, a quota change) and the audit's record of the answer are kept
as message codes: each reads in the reader's language, whatever language the admin or the
owner acted in."""

from datetime import timedelta

from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation

from gpus.models import OwnerNotice, ProcedureRun
from gpus.tasks import execute_run
from workspaces.models import Decision, ReclaimAsk

from .conftest import text
from .test_quota_edit import SHARED, fast_engine, gpu_pod, hard, team  # noqa: F401  (fixtures)


def page_in(client: Client, url: str, language: str) -> str:
    client.cookies["django_language"] = language
    return text(client.get(url, HTTP_ACCEPT_LANGUAGE=language).content)


CHANGED_EN = "changed the nvidia.com/gpu.shared quota of your Workspace from 3 to 1"


def test_the_owners_notices_and_the_answer_read_in_each_readers_language(
    team,  # noqa: F811  (a fixture imported above)
    login,
    admin_user,
    alice,
    twin,
):
    admin, owner = login(admin_user), login(alice)
    # the admin asks in Korean, the owner answers in Korean
    admin.cookies["django_language"] = "ko"
    admin.post(reverse("reclaim_ask", args=["team-a"]), {"days": "7", "message": "idle?"}, HTTP_ACCEPT_LANGUAGE="ko")
    question = ReclaimAsk.objects.get()
    until = (timezone.now() + timedelta(days=10)).date()
    owner.cookies["django_language"] = "ko"
    owner.post(
        reverse("reclaim_keep", args=[team.pk, question.pk]),
        {"until": until.isoformat(), "reason": "paper deadline"},
        HTTP_ACCEPT_LANGUAGE="ko",
    )
    detail = reverse("workspace_detail", args=[team.pk])

    english = page_in(owner, detail, "en")
    assert "An admin (root) asks whether Workspace team-a still needs its 3 nvidia.com/gpu.shared" in english
    assert f"alice keeps 3 nvidia.com/gpu.shared until {until.isoformat()}: paper deadline" in english

    korean = page_in(owner, detail, "ko")
    assert "관리자(root)가 Workspace team-a에 nvidia.com/gpu.shared 3개가 아직 필요한지 묻습니다" in korean
    assert f"alice이(가) nvidia.com/gpu.shared 3개를 {until.isoformat()}까지 유지합니다: paper deadline" in korean
    assert "asks whether Workspace" not in korean and "keeps 3" not in korean
    assert "paper deadline" in korean  # the owner's own words stay as written
    admin_korean = page_in(admin, reverse("cluster_workspace", args=["team-a"]), "ko")
    assert "asks whether Workspace" not in admin_korean and "keeps 3" not in admin_korean

    # the audit's record of the answer
    answer = Decision.objects.get(action=Decision.Action.RECLAIM_ANSWER)
    with translation.override("en"):
        assert answer.shown_detail.startswith("alice keeps 3 nvidia.com/gpu.shared until")
    with translation.override("ko"):
        assert "keeps" not in answer.shown_detail and "paper deadline" in answer.shown_detail

    # a quota change the owner is told of
    ReclaimAsk.objects.filter(pk=question.pk).update(keep_until=timezone.now().date() - timedelta(days=1))
    admin.post(reverse("workspace_quota", args=["team-a"]), {"gpu": "1", "reclaim_of": str(question.pk)})
    execute_run(ProcedureRun.objects.get().pk)
    assert hard(twin, "team-a")["requests." + SHARED] == "1"
    assert CHANGED_EN in page_in(owner, detail, "en")
    korean = page_in(owner, detail, "ko")
    assert (
        CHANGED_EN not in korean
        and "관리자(root)가 Workspace의 nvidia.com/gpu.shared 쿼터를 3에서 1(으)로 변경했습니다" in korean
    )
    notice = OwnerNotice.objects.filter(namespace="team-a", run__isnull=False).get()
    assert notice.message_said["code"] == "notice.quota_changed"
