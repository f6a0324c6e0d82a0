"""Moving memory in and out: the legacy KV import, the full export and the full import (SPEC X)."""
