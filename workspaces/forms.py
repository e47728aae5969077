import re

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils.translation import gettext_lazy as _

from brickadmin.cluster import ClusterError
from brickadmin.forms import ascii_number

from . import approvals, elastic
from .models import ResourceLimit, WorkspaceRequest

AMOUNT_FIELDS = (
    ("gpu", _("GPU"), _("GPU")),
    ("cpu", _("CPU"), _("CPU")),
    ("memory_gib", _("Memory"), _("GiB")),
    ("storage_gib", _("Storage"), _("GiB")),
)


# The OCI / Docker image reference grammar (distribution/reference), one regular expression
# per part and no part with overlapping repetition: each runs in linear time. The former
# single expression let "_" match both a separator and a word character, and an image of
# "a", 44 underscores and "!" backtracked for 89 s.
IMAGE_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:__|[._]|-+)[a-z0-9]+)*")
IMAGE_DOMAIN = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
IMAGE_DIGEST = re.compile(r"sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}")


def is_image_reference(ref: str) -> bool:
    """``[domain[:port]/]path[:tag][@digest]``; the first part is the registry when it has
    a "." or ":", is "localhost" or has capitals (as Docker reads it)."""
    if not ref or len(ref) > 512 or not ref.isascii():
        return False
    name, at, digest = ref.partition("@")
    if at and not IMAGE_DIGEST.fullmatch(digest):
        return False
    colon = name.rfind(":")
    if colon > name.rfind("/"):
        name, tag = name[:colon], name[colon + 1 :]
        if not IMAGE_TAG.fullmatch(tag):
            return False
    if len(name) > 255:
        return False
    parts = name.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        parts.pop(0)
        if not IMAGE_DOMAIN.fullmatch(first) or any(
            label.startswith("-") or label.endswith("-") for label in first.split(":")[0].split(".")
        ):
            return False
    return all(IMAGE_PATH_COMPONENT.fullmatch(p) for p in parts)


class WorkspaceRequestForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=200,
        strip=True,
        help_text=_("Becomes the Kubernetes namespace: lowercase letters, digits and '-', at most 63."),
    )
    # Most requests are for a GPU: one is the starting figure; 0 asks for a CPU-only Workspace.
    gpu = forms.IntegerField(
        label=_("GPU"), initial=1, error_messages={"required": _("How many GPUs: 0 for a CPU-only Workspace.")}
    )
    cpu = forms.IntegerField(label=_("CPU"), initial=2)
    memory_gib = forms.IntegerField(label=_("Memory (GiB)"), initial=8)
    storage_gib = forms.IntegerField(label=_("Storage (GiB)"), initial=20)
    purpose = forms.CharField(
        label=_("Purpose"),
        required=False,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("What it is for (project, model, deadline): the admins read it when they decide."),
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.limits = approvals.limits_for(user)
        for key, _label, unit in AMOUNT_FIELDS:
            f = self.fields[key]
            f.max_value = self.limits[key]
            f.widget.attrs.update({"min": 0, "max": self.limits[key]})
            f.unit = unit
            f.limit = self.limits[key]
        self.fields["name"].widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})

    def clean_name(self):
        name = self.cleaned_data["name"]
        problem = approvals.name_problem(name)
        if problem:
            raise forms.ValidationError(problem, code="invalid")
        try:
            taken = approvals.name_taken(name)
        except ClusterError:
            raise forms.ValidationError(
                _("The cluster cannot be read to check this name; try again."), code="unavailable"
            ) from None
        if taken:
            raise forms.ValidationError(taken, code="taken")
        return name

    def _amount(self, key):
        value = self.cleaned_data[key]
        if value < 0:
            raise forms.ValidationError(_("Cannot be negative."), code="negative")
        if value > self.limits[key]:
            raise forms.ValidationError(_("At most %(max)s.") % {"max": self.limits[key]}, code="over_max")
        return value

    def clean_gpu(self):
        return self._amount("gpu")

    def clean_cpu(self):
        value = self._amount("cpu")
        if value == 0:
            raise forms.ValidationError(_("A Workspace needs at least 1 CPU."), code="min")
        return value

    def clean_memory_gib(self):
        value = self._amount("memory_gib")
        if value == 0:
            raise forms.ValidationError(_("A Workspace needs at least 1 GiB of memory."), code="min")
        return value

    def clean_storage_gib(self):
        return self._amount("storage_gib")

    def amount_fields(self):
        return [self[key] for key, _l, _u in AMOUNT_FIELDS]


class ApproveForm(forms.Form):
    """The admin's choice for one request. ``resource`` can only be one of the GPU
    choices the ledger offers (all of them nvidia.com/gpu, gpu.shared or mig-*)."""

    resource = forms.ChoiceField(label=_("GPU type"), required=False)
    overcommit = forms.BooleanField(label=_("Approve beyond what is available (overcommit)"), required=False)
    # Elastic quota, where the cluster serves Kueue (workspaces/elastic.py); ignored where it does not.
    guarantee = forms.IntegerField(label=_("Guarantee"), required=False, min_value=0, max_value=10000)
    burst = forms.IntegerField(label=_("Burst ceiling"), required=False, min_value=0, max_value=10000)
    lend = forms.IntegerField(label=_("Lend ceiling"), required=False, min_value=0, max_value=10000)

    def __init__(self, *args, request_obj: WorkspaceRequest, choices, **kwargs):
        super().__init__(*args, **kwargs)
        self.request_obj = request_obj
        self.fields["resource"].choices = [(c.resource, c.resource) for c in choices]
        self.choices_by_resource = {c.resource: c for c in choices}
        grant = elastic.default_grant(request_obj.gpu)
        self.initial.update(guarantee=grant.guarantee, burst=grant.burst, lend=grant.lend)

    def clean(self):
        data = super().clean()
        if self.request_obj.gpu and not data.get("resource"):
            self.add_error("resource", _("Choose Exclusive, Shared or a MIG profile."))
        choice = self.choices_by_resource.get(data.get("resource") or "")
        if choice and self.request_obj.gpu > choice.available and not data.get("overcommit"):
            self.add_error(
                "overcommit",
                _("Only %(a)s available: tick overcommit to approve %(n)s anyway (it is recorded).")
                % {"a": choice.available, "n": self.request_obj.gpu},
            )
        data["grant"] = self._grant(data)
        return data

    def _grant(self, data):
        """The guarantee, burst and lend ceilings given (None: the defaults): the guarantee at
        most what was requested, the lend ceiling at most the guarantee (Kueue refuses more)."""
        if data.get("guarantee") is None:
            return None
        guarantee = data["guarantee"]
        if guarantee > self.request_obj.gpu:
            self.add_error("guarantee", _("At most the %(n)s GPUs requested.") % {"n": self.request_obj.gpu})
        default = elastic.default_grant(guarantee)
        burst = default.burst if data.get("burst") is None else data["burst"]
        lend = default.lend if data.get("lend") is None else data["lend"]
        if lend is not None and lend > guarantee:
            self.add_error("lend", _("At most the guarantee: a Workspace lends only what it is guaranteed."))
        return elastic.kueue.Grant(guarantee, burst, lend)


class RejectForm(forms.Form):
    reason = forms.CharField(
        label=_("Reason (the user sees it)"), widget=forms.Textarea(attrs={"rows": 2}), max_length=2000
    )

    def clean_reason(self):
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError(_("A rejection needs a reason."), code="required")
        return reason


class JobForm(forms.Form):
    workspace = forms.ModelChoiceField(label=_("Workspace"), queryset=WorkspaceRequest.objects.none(), empty_label=None)
    node = forms.ChoiceField(label=_("Node"), widget=forms.RadioSelect)
    image = forms.CharField(
        label=_("Image"), max_length=512, help_text=_("Container image, e.g. nvcr.io/nvidia/pytorch:24.05-py3")
    )
    command = forms.CharField(
        label=_("Command"),
        max_length=4000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("Run as the container command (split like a shell would, not run by one)."),
    )
    gpu = forms.IntegerField(label=_("GPU count"), initial=1)

    def __init__(self, *args, user, node_options, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["workspace"].queryset = WorkspaceRequest.objects.filter(
            requester=user, status=WorkspaceRequest.Status.APPROVED
        ).order_by("name")
        self.node_options = node_options
        self.fields["node"].choices = [(o.name, o.name) for o in node_options if o.selectable]

    def clean_image(self):
        image = self.cleaned_data["image"].strip()
        if not is_image_reference(image):
            raise forms.ValidationError(_("Not a container image reference."), code="invalid")
        return image

    def clean_command(self):
        import shlex

        command = self.cleaned_data["command"]
        try:
            shlex.split(command)
        except ValueError as exc:
            raise forms.ValidationError(_("Cannot split this command: %(e)s") % {"e": exc}, code="invalid") from None
        return command

    def clean_gpu(self):
        gpu = self.cleaned_data["gpu"]
        if gpu < 1:
            raise forms.ValidationError(_("A Job needs at least 1 GPU."), code="min")
        return gpu

    def clean(self):
        data = super().clean()
        node = data.get("node")
        gpu = data.get("gpu")
        option = next((o for o in self.node_options if o.name == node), None)
        workspace = data.get("workspace")
        if option and workspace is not None:
            from .jobs import node_mismatch

            mismatch = node_mismatch(option, workspace)
            if mismatch:
                self.add_error("node", mismatch)
                return data
        if option and gpu and gpu > option.free:
            self.add_error("gpu", _("At most %(f)s: the free GPUs on %(n)s.") % {"f": option.free, "n": node})
        return data


class JobSettingsForm(forms.Form):
    approval_required = forms.BooleanField(label=_("Job approval required"), required=False)
    access_text = forms.CharField(
        label=_("How users get access to the cluster"),
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_(
            "Shown on every approved Workspace's page (the platform's kubeconfig, SSO...). Empty: the default text."
        ),
    )


class KeyChoiceField(forms.ModelChoiceField):
    """A choice posted as its primary key, in ASCII digits only: int() reads "٣" or "３" as 3,
    which would pick another row than the one the page offered."""

    def to_python(self, value):
        if value not in self.empty_values:
            if ascii_number(str(value).strip()) is None:
                raise forms.ValidationError(
                    self.error_messages["invalid_choice"], code="invalid_choice", params={"value": value}
                )
        return super().to_python(value)


class ResourceLimitForm(forms.ModelForm):
    user = KeyChoiceField(queryset=get_user_model().objects.order_by("username"), required=False, label=_("User"))
    group = KeyChoiceField(queryset=Group.objects.order_by("name"), required=False, label=_("Group"))

    class Meta:
        model = ResourceLimit
        fields = ["user", "group", "gpu", "cpu", "memory_gib", "storage_gib"]

    def clean(self):
        data = super().clean()
        if bool(data.get("user")) == bool(data.get("group")):
            raise forms.ValidationError(_("Choose either a user or a group."), code="who")
        return data


class AdoptForm(forms.Form):
    """Adopt a namespace that holds a GPU quota into a Workspace record: who owns it."""

    owner = forms.ModelChoiceField(
        label=_("Owner"),
        queryset=get_user_model().objects.none(),
        help_text=_("The user who will see it as their Workspace."),
    )
    note = forms.CharField(
        label=_("Note for the audit log (optional)"),
        required=False,
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["owner"].queryset = get_user_model().objects.filter(is_active=True).order_by("username")


class QuotaForm(forms.Form):
    """An admin's new GPU quota for a Workspace, with why (the owner reads it)."""

    gpu = forms.IntegerField(min_value=0, max_value=10000, label=_("New GPU quota"))
    reason = forms.CharField(max_length=500, required=False, label=_("Why (the owner and the audit log read it)"))
    undo_of = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    reclaim_of = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    # the plans' acknowledgement when the change takes a GPU type over its Total: the GPUs it covers
    capacity_acknowledged = forms.IntegerField(required=False, min_value=0, max_value=1000000)


class ElasticQuotaForm(forms.Form):
    """A Kueue Workspace's guarantee, burst and lend ceilings, with why: the same audited run
    as a quota change (workspaces/quota.py), its ResourceQuota set to guarantee + burst."""

    guarantee = forms.IntegerField(min_value=0, max_value=10000, label=_("Guarantee"))
    burst = forms.IntegerField(min_value=0, max_value=10000, label=_("Burst ceiling"))
    lend = forms.IntegerField(min_value=0, max_value=10000, label=_("Lend ceiling"))
    reason = forms.CharField(max_length=500, required=False, label=_("Why (the owner and the audit log read it)"))
    capacity_acknowledged = forms.IntegerField(required=False, min_value=0, max_value=1000000, widget=forms.HiddenInput)
    over_total = None  # the plans' acknowledgement, once a posted ceiling takes its GPU type over the Total

    def clean(self):
        data = super().clean()
        if data.get("lend") is not None and data.get("guarantee") is not None and data["lend"] > data["guarantee"]:
            self.add_error("lend", _("At most the guarantee: a Workspace lends only what it is guaranteed."))
        if not self.errors:
            data["grant"] = elastic.kueue.Grant(data["guarantee"], data["burst"], data["lend"])
        return data


class AskOwnerForm(forms.Form):
    days = forms.IntegerField(min_value=1, max_value=90, label=_("Days to answer"))
    message = forms.CharField(max_length=1000, required=False, label=_("Message to the owner"))


class KeepForm(forms.Form):
    until = forms.DateField(label=_("Keep it until"))
    reason = forms.CharField(max_length=1000, label=_("Why it is still needed"))


class ReleaseForm(forms.Form):
    amount = forms.IntegerField(min_value=1, max_value=10000, label=_("Release"))
