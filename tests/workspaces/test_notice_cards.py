"""The notices as their readers meet them: one card per question to the owner with its
history (the question, the answer, the quota change it led to), headed in words and dated
("root asked on 6 Dec · answer by 13 Dec", "You released 2 GPUs"), said of whoever acted ("You"
for the reader), in the reader's language."""

from datetime import UTC, datetime, timedelta

from django.urls import reverse
from django.utils import timezone

from gpus.models import ProcedureRun
from gpus.tasks import execute_run
from workspaces.models import ReclaimAsk

from .conftest import text
from .test_quota_edit import fast_engine, gpu_pod, hard, team  # noqa: F401  (fixtures)

ASKED = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
DUE = datetime(2026, 12, 13, 9, 0, tzinfo=UTC)


def asked(login, admin_user):
    login(admin_user).post(reverse("reclaim_ask", args=["team-a"]), {"days": "7", "message": "idle?"})
    ReclaimAsk.objects.update(asked_at=ASKED, deadline=DUE)
    return ReclaimAsk.objects.get()


def cards(html: bytes) -> list[str]:
    """The text of each notice card, in the order the page shows them."""
    page = html.decode()
    start = page.index('class="plain notice-cards"')
    cards = page[start : page.index("</ul>", start)]
    return [text("<li " + c) for c in cards.split('<li class="banner banner-info" data-testid="notice-card"')[1:]]


def page_in(client, url, language):
    client.cookies["django_language"] = language
    return client.get(url, HTTP_ACCEPT_LANGUAGE=language)


def test_a_question_and_its_release_are_one_card_told_to_each_reader_as_theirs(team, login, admin_user, alice, twin):  # noqa: F811
    question = asked(login, admin_user)
    owner = login(alice)
    owner.post(reverse("reclaim_release", args=[team.pk, question.pk]), {"amount": "2"})
    execute_run(ProcedureRun.objects.get().pk)  # the quota change the release started

    mine = cards(page_in(owner, reverse("workspace_detail", args=[team.pk]), "en").content)
    assert len(mine) == 1, mine  # the question, the release and the quota change: one card
    card = mine[0]
    assert card.startswith("root asked on 6 Dec · answer by 13 Dec")
    assert card.index("root asked") < card.index("You released 2 GPUs") < card.index("You changed the GPU quota on")
    assert "An admin (alice)" not in card and "reclaim-ask:" not in card and "quota:team-a" not in card

    theirs = cards(page_in(login(admin_user), reverse("cluster_workspace", args=["team-a"]), "en").content)
    assert len(theirs) == 1 and theirs[0].startswith("You asked on 6 Dec · answer by 13 Dec")
    assert "alice released 2 GPUs" in theirs[0] and "alice changed the GPU quota on" in theirs[0]


def test_a_kept_question_and_a_later_quota_change_read_in_korean(team, login, admin_user, alice, twin):  # noqa: F811
    from workspaces import quota

    question = asked(login, admin_user)
    until = (timezone.now() + timedelta(days=10)).date()
    owner = login(alice)
    owner.post(reverse("reclaim_keep", args=[team.pk, question.pk]), {"until": until.isoformat(), "reason": "paper"})
    execute_run(quota.change_quota("team-a", 2, actor=admin_user, reason="idle", dispatch=False).pk)

    english = cards(page_in(owner, reverse("workspace_detail", args=[team.pk]), "en").content)
    assert len(english) == 2  # the admin's own change is a card of its own, newest first
    assert english[0].startswith("root changed the GPU quota on")
    assert english[1].startswith("root asked on 6 Dec · answer by 13 Dec")
    assert f"You keep the GPUs until {until.day} {until.strftime('%b')}" in english[1]

    korean = cards(page_in(owner, reverse("workspace_detail", args=[team.pk]), "ko").content)
    assert korean[0].startswith("root이(가)") and "GPU 쿼터를 변경함" in korean[0]
    assert korean[1].startswith("root이(가) 12월 6일에 질문함 · 답변 기한 12월 13일")
    assert f"내가 {until.month}월 {until.day}일까지 GPU를 유지함" in korean[1]
    assert "asked on" not in " ".join(korean) and "keep the GPUs" not in " ".join(korean)
