"""Markers in the companion's raw output (SPEC A5, C2): acted on, never shown or stored.

The grammar is memory's, shared with the legacy import (LEGACY_KV.md rule 1).
"""

from memory.markers import StreamCleaner, clean

__all__ = ["StreamCleaner", "clean"]
