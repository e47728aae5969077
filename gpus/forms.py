from django import forms
from django.utils.translation import gettext_lazy as _

from .models import Procedure, RunStatus


class WizardForm(forms.Form):
    """Parameters of a procedure. ``node_choices`` are the eligible nodes."""

    node = forms.CharField(required=False, label=_("Node"))
    replicas = forms.IntegerField(required=False, min_value=2, max_value=64, label=_("New replicas"))
    sharing = forms.ChoiceField(required=False, label=_("Sharing mode"),
                                choices=[("none", _("Exclusive (none)")), ("timeslicing", _("Time-slicing"))])
    acknowledged = forms.BooleanField(required=False, label=_("I have agreed with the affected Workspace owners"))
    checklist_confirmed = forms.BooleanField(
        required=False, label=_("The NVIDIA driver and nvidia-container-runtime are installed on this node"))

    def __init__(self, code, *args, eligible=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.code = code
        self.eligible = eligible  # set of node names, or None (no node needed)

    def clean(self):
        data = super().clean()
        if self.code in ("A", "B", "D"):
            if not data.get("node"):
                self.add_error("node", _("Choose a node."))
            elif self.eligible is not None and data["node"] not in self.eligible:
                self.add_error("node", _("This procedure does not apply to that node."))
        if self.code == "C" and not data.get("replicas"):
            self.add_error("replicas", _("Give the new number of replicas (at least 2)."))
        if self.code == "D" and not data.get("sharing"):
            self.add_error("sharing", _("Choose the sharing mode."))
        return data

    def params(self):
        d = self.cleaned_data
        if self.code == "C":
            return {"replicas": d["replicas"]}
        if self.code == "D":
            return {"sharing": d["sharing"], "checklist_confirmed": bool(d.get("checklist_confirmed"))}
        return {"acknowledged": bool(d.get("acknowledged"))} if self.code == "B" else {}


class RunFilterForm(forms.Form):
    procedure = forms.ChoiceField(required=False, choices=[("", _("All"))] + list(Procedure.choices),
                                  label=_("Procedure"))
    status = forms.ChoiceField(required=False, choices=[("", _("All"))] + list(RunStatus.choices), label=_("Status"))
    node = forms.CharField(required=False, label=_("Node"))
    actor = forms.CharField(required=False, label=_("By"))


class ManifestForm(forms.Form):
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 30, "spellcheck": "false", "class": "code"}),
                              label=_("brick-nvidia-device-plugin.yaml"))
    note = forms.CharField(required=False, max_length=300, label=_("What changed"))
