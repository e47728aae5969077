"""The language menu names each language in its own
language, whatever the page's language is."""

import re

import pytest


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_language_menu_names_its_languages(twin, alice_client, lang):
    alice_client.cookies["django_language"] = lang
    html = alice_client.get("/").content.decode()
    options = re.findall(r'<option value="(\w+)" lang="(\w+)"( selected)?>([^<]+)</option>', html)
    assert [(v, la, name) for v, la, _s, name in options] == [("en", "en", "English"), ("ko", "ko", "한국어")]
    assert [v for v, _la, s, _n in options if s] == [lang]
