"""The PostgreSQL engine: Django's, with the health check of a kept connection (CONN_HEALTH_CHECKS)
made by looking at its socket instead of a `SELECT 1` round trip, while nothing came on it.

Django checks a kept connection before its first query of each request, and the chat's database
calls each count as one (channels' `database_sync_to_async`): five `SELECT 1` round trips a chat
turn, three before its first token, each a wake-up of a server backend and of the calling thread
(BENCH §4, issue 24 point 11). An idle connection receives nothing unless the server ends it: a
restart, `pg_terminate_backend`, a crashed backend — each sends its notice or closes the socket,
which makes it readable. So a connection that is open, idle and not readable is used as it is;
any other is checked with Django's own query, as before (the precedent: an HTTP client's pool
looks whether a kept-alive socket became readable before reusing it).

With server-side binding (OPTIONS `server_side_binding`), psycopg prepares a statement once a
connection has run it `prepare_threshold` times. Such a connection plans each run for its own
values (`plan_cache_mode = force_custom_plan`), as an unprepared statement is: after five runs
PostgreSQL may switch a prepared statement to one plan for all values, chosen by cost estimates,
and a plan that suits a small profile can be the wrong one for a person's 100k-line archive. What
preparing saves is the parse and analysis of each run, and quoting the values into its text."""

import select

from django.db.backends.postgresql import base
from psycopg import pq


def quiet(connection) -> bool:
    """Whether this psycopg connection is open, outside any transaction, and has had nothing
    from the server since its last answer (no bytes, no close, no error on its socket)."""
    if connection.closed or connection.broken or connection.info.transaction_status != pq.TransactionStatus.IDLE:
        return False
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN | select.POLLPRI)
    return not poller.poll(0)


class DatabaseWrapper(base.DatabaseWrapper):
    def close_if_health_check_failed(self):
        if self.connection is not None and self.health_check_enabled and not self.health_check_done and quiet(self.connection):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _configure_connection(self, connection):
        commit = super()._configure_connection(connection)
        if self.settings_dict["OPTIONS"].get("server_side_binding") and connection.prepare_threshold is not None:
            with connection.cursor() as cursor:
                cursor.execute("SET plan_cache_mode = force_custom_plan")
            commit = True
        return commit
