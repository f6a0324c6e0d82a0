"""The legacy content hash (LEGACY_KV.md "strHash"), kept bit-for-bit."""


def str_hash(text: str) -> str:
    """JavaScript's classic `h = h*31 + charCodeAt(i)` over UTF-16 units, as unsigned hex."""
    h = 0
    data = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (h * 31 + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return format(h, "x")


def content_hash(profile_key: str, content: str) -> str:
    """SPEC A6: strHash(profile + '|' + content); new messages use the legacy function too."""
    return str_hash(f"{profile_key}|{content}")
