"""`next` parameters only ever lead inside the site (S5, issue 16 point 6): shared by the page
families that redirect back or render a "back"/"cancel" link from one."""

from django.utils.http import url_has_allowed_host_and_scheme


def local_path(value) -> str | None:
    """`value` when it is a path on this site ("/…", no scheme, no host, no "//" or "\\"),
    else None — so neither a redirect nor an href can leave the site or run `javascript:`."""
    if not isinstance(value, str) or not value.startswith("/") or value.startswith(("//", "/\\")):
        return None
    if "\\" in value or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return None
    return value if url_has_allowed_host_and_scheme(value, allowed_hosts=set()) else None
