"""Django's PostgreSQL backend, with a kept connection's health check made without a round trip
while nothing came on its socket, and prepared statements planned for each run's own values
(`base`): the PostgreSQL engine of DATABASES (previously/settings.py)."""
