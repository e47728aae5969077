from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "brickadmin.accounts"
    label = "accounts"
    verbose_name = _("Personal settings")

    def ready(self):
        from .usernames import install

        install()  # look-alike usernames are refused for every account
