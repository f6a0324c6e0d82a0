"""Django's SQLite backend, with the writers kept waiting for the write lock made visible to a
bulk writer (`waiting`): the SQLite engine of DATABASES (previously/settings.py)."""
