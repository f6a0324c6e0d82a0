"""The legacy content hash (LEGACY_KV.md "strHash"), kept bit-for-bit."""

import numpy as np

# Above this many UTF-16 units the sum is taken with numpy (a history import hashes 150k lines).
VECTOR_FROM = 48
_POWERS = np.ones(1, dtype=np.uint32)


def _powers(n: int) -> np.ndarray:
    """31**k mod 2**32 for k = n-1 … 0 (uint32 arithmetic wraps modulo 2**32)."""
    global _POWERS
    if len(_POWERS) < n:
        size = max(n, 2 * len(_POWERS))
        powers = np.empty(size, dtype=np.uint32)
        powers[0] = 1
        with np.errstate(over="ignore"):
            for k in range(1, size):
                powers[k] = powers[k - 1] * np.uint32(31)
        _POWERS = powers
    return _POWERS[:n][::-1]


def str_hash(text: str) -> str:
    """JavaScript's classic `h = h*31 + charCodeAt(i)` over UTF-16 units, as unsigned hex:
    the sum of unit[i] * 31**(n-1-i), modulo 2**32."""
    data = text.encode("utf-16-le", "surrogatepass")
    if len(data) // 2 >= VECTOR_FROM:
        units = np.frombuffer(data, dtype="<u2").astype(np.uint32)
        with np.errstate(over="ignore"):
            h = int(np.sum(units * _powers(len(units)), dtype=np.uint32))
        return format(h, "x")
    h = 0
    for i in range(0, len(data), 2):
        h = (h * 31 + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return format(h, "x")


def content_hash(profile_key: str, content: str) -> str:
    """SPEC A6: strHash(profile + '|' + content); new messages use the legacy function too."""
    return str_hash(f"{profile_key}|{content}")
