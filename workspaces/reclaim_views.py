"""Asking before reclaiming (workspaces/reclaim.py): the admin's question, the owner's answers.
The reclaim itself is the quota page's preview and confirmation (cluster_views.workspace_quota)."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from brickadmin.permissions import admin_required

from . import reclaim
from .forms import AskOwnerForm, KeepForm, ReleaseForm
from .models import ReclaimAsk, WorkspaceRequest


@require_POST
@admin_required
def ask_owner(request, namespace):
    form = AskOwnerForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errs in form.errors.values() for e in errs))
        return redirect("workspace_quota", namespace=namespace)
    try:
        reclaim.ask_owner(
            namespace, actor=request.user, days=form.cleaned_data["days"], message=form.cleaned_data["message"]
        )
    except (reclaim.ReclaimError, reclaim.quota_mod.QuotaError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("The owner of %(ws)s is asked; their answer shows here.") % {"ws": namespace})
    return redirect("workspace_quota", namespace=namespace)


def _own_ask(request, pk, ask_pk):
    """The question about one of the user's own Workspaces (404 for anyone else's)."""
    ws = get_object_or_404(WorkspaceRequest, pk=pk, requester=request.user, status=WorkspaceRequest.Status.APPROVED)
    return ws, get_object_or_404(ReclaimAsk, pk=ask_pk, namespace=ws.name)


@require_POST
def answer_keep(request, pk, ask_pk):
    ws, ask = _own_ask(request, pk, ask_pk)
    form = KeepForm(request.POST)
    try:
        if not form.is_valid():
            raise reclaim.ReclaimError(" ".join(str(e) for errs in form.errors.values() for e in errs))
        reclaim.answer_keep(ask, request.user, until=form.cleaned_data["until"], reason=form.cleaned_data["reason"])
    except reclaim.ReclaimError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Your answer is recorded: the admins see it."))
    return redirect("workspace_detail", pk=ws.pk)


@require_POST
def answer_release(request, pk, ask_pk):
    ws, ask = _own_ask(request, pk, ask_pk)
    form = ReleaseForm(request.POST)
    try:
        if not form.is_valid():
            raise reclaim.ReclaimError(" ".join(str(e) for errs in form.errors.values() for e in errs))
        reclaim.answer_release(ask, request.user, amount=form.cleaned_data["amount"])
    except reclaim.ReclaimError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Released: the quota change is under way."))
    return redirect("workspace_detail", pk=ws.pk)
