"""The managed device-plugin manifest: versions, validation, drift, save and apply."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from brickadmin.cluster import ClusterError
from brickadmin.cluster.gateway import get_gateway
from brickadmin.forms import ascii_number
from brickadmin.middleware import show_cluster_error
from brickadmin.permissions import admin_required
from brickadmin.tables import Column, Table
from gpus.view import publish as view_publish
from gpus.view.reading import read_cluster

from .. import manifest as manifest_mod
from ..forms import ManifestForm
from ..models import ManifestVersion

VERSION_TABLE = Table(
    Column("version", gettext_lazy("Version"), numeric=True),
    Column("saved", gettext_lazy("Saved"), "created_at"),
    Column("by", gettext_lazy("By"), "actor_name"),
    Column("note", gettext_lazy("Note")),
    Column("run", gettext_lazy("Run"), "run_id", numeric=True),
    Column("applied", gettext_lazy("Applied"), "applied_at"),
    search=("note", "actor_name"),
    default="-version",
    per_page=10,
)


@require_GET
@admin_required
def manifest_view(request):
    cur = manifest_mod.current()
    version = cur
    if request.GET.get("v"):
        number = ascii_number(request.GET["v"], max_digits=9)
        if number is None:
            raise Http404(_("No such manifest version"))
        version = get_object_or_404(ManifestVersion, version=number)
    versions = VERSION_TABLE.bind(request, ManifestVersion.objects.all())
    if versions.wants_csv:
        return versions.csv_response("manifest-versions")
    return render(
        request,
        "gpus/wizards/manifest.html",
        _manifest_context(request, version, cur, ManifestForm(initial={"content": cur.content}), versions),
    )


def _manifest_context(request, version, cur, form, versions=None):
    docs, error, validation, drift = [], "", None, []
    try:
        docs = manifest_mod.parse(version.content)
        validation = manifest_mod.validate(docs)
    except manifest_mod.ManifestError as exc:
        error = str(exc)
    if docs:  # the page looks: the view's device-plugin objects, as the Health page's drift
        try:
            drift = view_publish.snapshot_drift(read_cluster().snapshot, docs) or []
        except ClusterError as exc:
            show_cluster_error(request, exc)
    versions = versions or VERSION_TABLE.bind(request, ManifestVersion.objects.all())
    return {
        "version": version,
        "current": cur,
        "table": versions,
        "page": versions.page,
        "validation": validation,
        "error": error,
        "drift": drift,
        "form": form,
        "in_sync": drift and all(d.state == "in-sync" for d in drift),
    }


@require_POST
@admin_required
def manifest_save(request):
    """Saves a valid version; otherwise the page again, what was typed kept and the reason
    beside the field (a note too long, YAML nested too deep, a document not allowed...)."""
    form = ManifestForm(request.POST)
    if form.is_valid():
        try:
            v = manifest_mod.save_version(
                form.cleaned_data["content"].replace("\r\n", "\n"), actor=request.user, note=form.cleaned_data["note"]
            )
            messages.success(request, _("Saved as version %(v)d. Apply it to change the cluster.") % {"v": v.version})
            return redirect("manifest")
        except manifest_mod.ManifestError as exc:
            form.add_error("content", _("Not saved: %(err)s") % {"err": exc})
    messages.error(request, _("Not saved: see the reason beside the field below."))
    cur = manifest_mod.current()
    return render(request, "gpus/wizards/manifest.html", _manifest_context(request, cur, cur, form), status=400)


@require_POST
@admin_required
def manifest_apply(request):
    from django.utils import timezone

    cur = manifest_mod.current()
    try:
        docs = manifest_mod.parse(cur.content)
        result = manifest_mod.validate(docs)
    except manifest_mod.ManifestError as exc:
        messages.error(request, _("Version %(v)d is not valid: %(e)s") % {"v": cur.version, "e": exc})
        return redirect("manifest")
    if not result.ok:
        messages.error(
            request, _("Version %(v)d is not valid: %(e)s") % {"v": cur.version, "e": "; ".join(result.errors)}
        )
        return redirect("manifest")
    try:
        lines = manifest_mod.apply(docs, get_gateway())
    except manifest_mod.ManifestError as exc:
        messages.error(request, _("Version %(v)d is not valid: %(e)s") % {"v": cur.version, "e": exc})
        return redirect("manifest")
    except ClusterError as exc:
        messages.error(request, _("Apply failed: %(err)s") % {"err": exc})
        return redirect("manifest")
    ManifestVersion.objects.filter(pk=cur.pk).update(applied_at=timezone.now())
    messages.success(
        request,
        _(
            "Applied version %(v)d: %(lines)s. A ConfigMap change takes effect only after a "
            "rollout restart (procedure C does both)."
        )
        % {"v": cur.version, "lines": "; ".join(lines)},
    )
    return redirect("manifest")
