import pytest
from django.urls import reverse


@pytest.mark.django_db
def test_home_requires_login(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302 and reverse("login") in response.url


@pytest.mark.django_db
def test_login_page_renders(client):
    assert client.get(reverse("login")).status_code == 200


def test_memory_never_imports_previously():
    """DESIGN.md's one rule: previously depends on memory, never the reverse."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2] / "memory"
    offenders = [
        str(p)
        for p in root.rglob("*.py")
        if re.search(r"^\s*(from|import)\s+previously\b", p.read_text(), re.M)
    ]
    assert offenders == []
