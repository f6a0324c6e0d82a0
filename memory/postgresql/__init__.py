"""Django's PostgreSQL backend, with a kept connection's health check made without a round trip
while nothing came on its socket (`base`): the PostgreSQL engine of DATABASES
(previously/settings.py)."""
