"""A slice's page (K13, S2)."""
