"""The SQLite engine: Django's, with each statement that may wait for the write lock marked as
waiting while it does (memory.sqlite.waiting)."""

from django.db.backends.sqlite3 import base

from memory.sqlite.waiting import Waiting

READS = ("SELECT", "PRAGMA", "SAVEPOINT", "RELEASE", "ROLLBACK")  # never wait for the write lock


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    """A statement outside a transaction that may wait for the write lock (BEGIN IMMEDIATE, which
    `transaction_mode` makes every transaction's first, or a write in autocommit) is marked as
    waiting while it runs; inside a transaction the lock is held already."""

    waiting = None

    def _may_wait(self, query) -> bool:
        return (self.waiting is not None and not self.connection.in_transaction
                and not query[:24].lstrip().upper().startswith(READS))

    def execute(self, query, params=None):
        if self._may_wait(query):
            with self.waiting.wait():
                return super().execute(query, params)
        return super().execute(query, params)

    def executemany(self, query, param_list):
        if self._may_wait(query):
            with self.waiting.wait():
                return super().executemany(query, param_list)
        return super().executemany(query, param_list)


class DatabaseWrapper(base.DatabaseWrapper):
    waiting: Waiting | None = None

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        self.waiting = Waiting.of(str(conn_params.get("database", "")))
        return connection

    def _close(self):
        try:
            super()._close()
        finally:
            if self.waiting is not None:
                self.waiting.close()

    def create_cursor(self, name=None):
        cursor = self.connection.cursor(factory=SQLiteCursorWrapper)
        cursor.waiting = self.waiting
        return cursor
