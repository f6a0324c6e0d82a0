"""The legacy content hash (LEGACY_KV.md "strHash"), kept bit-for-bit."""

import numpy as np

# strHash is the polynomial sum(c_i * 31^(n-1-i)) mod 2^32 over the UTF-16 units c_i. Past a
# few dozen units numpy computes it at once (BENCH §3: an import hashes every line it makes;
# the loop below cost a second on 120k lines of realistic length). uint64 arithmetic wraps
# mod 2^64, a multiple of 2^32, so the low 32 bits are exact.
_SHORT = 40
_powers = np.ones(1, dtype=np.uint64)  # _powers[k] = 31^k mod 2^32


def _powers_up_to(n: int) -> np.ndarray:
    global _powers
    if len(_powers) < n:
        size = max(n, 2 * len(_powers))
        powers = np.empty(size, dtype=np.uint64)
        powers[0] = 1
        for k in range(1, size):  # once per size doubling
            powers[k] = (int(powers[k - 1]) * 31) & 0xFFFFFFFF
        _powers = powers
    return _powers


def str_hash(text: str) -> str:
    """JavaScript's classic `h = h*31 + charCodeAt(i)` over UTF-16 units, as unsigned hex."""
    data = text.encode("utf-16-le", "surrogatepass")
    n = len(data) // 2
    if n <= _SHORT:
        h = 0
        for i in range(0, len(data), 2):
            h = (h * 31 + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
        return format(h, "x")
    units = np.frombuffer(data, dtype="<u2").astype(np.uint64)
    h = int(np.dot(units, _powers_up_to(n)[n - 1 :: -1])) & 0xFFFFFFFF
    return format(h, "x")


def content_hash(profile_key: str, content: str) -> str:
    """SPEC A6: strHash(profile + '|' + content); new messages use the legacy function too."""
    return str_hash(f"{profile_key}|{content}")
