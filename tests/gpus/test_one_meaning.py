"""One meaning per word: a cordoned node counts 0 unrequested GPUs (it takes no new pod), and
the cluster's quota headroom and a node's unrequested GPUs carry different names."""

import pytest
from django.utils import translation

from gpus.numbers import capacity


@pytest.mark.parametrize(
    "logical,requested,cordoned,expect", [(8, 2, False, 6), (8, 2, True, 0), (4, 6, False, 0), (0, 0, True, 0)]
)
def test_unrequested_on_a_node(logical, requested, cordoned, expect):
    assert capacity.unrequested_on_node(logical, requested, cordoned) == expect


def test_the_two_frees_have_two_names_in_both_languages():
    from gpus.templatetags.brick import GLOSSARY

    for lang in ("en", "ko"):
        with translation.override(lang):
            headroom, unrequested = str(GLOSSARY["free"][0]), str(GLOSSARY["node_free"][0])
        assert headroom != unrequested
    with translation.override("en"):
        assert (str(GLOSSARY["free"][0]), str(GLOSSARY["node_free"][0])) == (
            "Quota headroom",
            "Unrequested on the node",
        )


@pytest.mark.django_db
def test_a_cordoned_node_shows_0_unrequested_on_the_nodes_page(twin, admin_client):
    from types import SimpleNamespace

    from gpus.templatetags.brick import node_free

    assert node_free(SimpleNamespace(logical=6, requested=0, cordoned=True)) == 0
    assert node_free(SimpleNamespace(logical=6, requested=0, cordoned=False)) == 6
    page = admin_client.get("/nodes/").content.decode()
    assert "Unrequested on the node" in page and ">Free<" not in page
