from django import forms
from django.utils.translation import gettext_lazy as _

from .models import RunStatus
from .procedures import registry


class WizardForm(forms.Form):
    """A procedure's parameters: the node when it needs one, then the fields its
    definition declares. ``eligible`` is the set of node names it applies to (None: no
    node needed, or no restriction)."""

    node = forms.CharField(required=False, label=_("Node"))

    def __init__(self, proc, *args, eligible=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.proc = proc
        self.eligible = eligible
        for p in proc.params:
            self.fields[p.name] = p.field()

    @property
    def pick_fields(self):
        """The bound fields the pick page asks for (not the plan page's confirmations)."""
        return [self[p.name] for p in self.proc.pick_params]

    def clean(self):
        data = super().clean()
        if self.proc.needs_node:
            if not data.get("node"):
                self.add_error("node", _("Choose a node."))
            elif self.eligible is not None and data["node"] not in self.eligible:
                self.add_error("node", _("This procedure does not apply to that node."))
        return data

    def params(self):
        d = self.cleaned_data
        return {p.name: (bool(d.get(p.name)) if p.confirm else d[p.name]) for p in self.proc.params}

    def missing_confirmations(self, needs_ack: bool) -> list[str]:
        """Why the run cannot start yet: a plan-page confirmation left unticked."""
        return [str(p.refusal) for p in self.proc.confirm_params
                if (p.confirm == "always" or (p.confirm == "ack" and needs_ack)) and not self.cleaned_data.get(p.name)]


class RunFilterForm(forms.Form):
    procedure = forms.ChoiceField(required=False, choices=lambda: [("", _("All"))] + registry.choices(),
                                  label=_("Procedure"))
    status = forms.ChoiceField(required=False, choices=[("", _("All"))] + list(RunStatus.choices), label=_("Status"))
    node = forms.CharField(required=False, label=_("Node"))
    actor = forms.CharField(required=False, label=_("By"))


class ManifestForm(forms.Form):
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 30, "spellcheck": "false", "class": "code"}),
                              label=_("brick-nvidia-device-plugin.yaml"))
    note = forms.CharField(required=False, max_length=300, label=_("What changed"))
