"""The data page: download a full export, upload one with a dry-run preview (SPEC X1, X2)."""
