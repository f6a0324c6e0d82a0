"""Plain `executemany` inserts for the importer's big tables (BENCH.md §3).

`QuerySet.bulk_create` needs model instances and compiles one multi-row INSERT per batch
through the query compiler. The importer writes tens of thousands of rows of a few models,
so it builds them as plain named records (dataclasses whose attributes are the model's
column attnames) and hands the database driver one one-row INSERT to execute many times.

Values go to the database as the field's `get_db_prep_save` would send them: aware
datetimes and JSON through the backend's own adapters, text and integers as they are (the
planner builds them from checked legacy values). Rows are inserted in list order, in the
caller's transaction; database constraints are enforced by the database. Primary keys are
not returned: a caller that needs them either reads them back by a unique key, or reserves
them first (`reserve_pks`) and inserts them with the rows (`with_pk=True`), which spares the
read-back and lets rows in one batch point at each other as they are inserted.
"""

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cache
from operator import attrgetter
from typing import Any

from django.conf import settings
from django.db import connections, models, transaction
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

CHUNK = 5000
STEP_ROWS = 250  # rows of a batch written between two looks for a waiting writer (write_in_steps)


def new_instance(model: type[models.Model], values: Sequence[Any]) -> models.Model:
    """`model(*values)`, `values` every concrete field's in order, without `Model.__init__`'s
    setattr through a descriptor per field (issue 24 point 6: ~3 % of a 200k-line import's apply,
    alternating runs). The same new, unsaved instance, where no receiver listens to the model's
    init signals (else it is made the usual way, for them)."""
    if pre_init.has_listeners(model) or post_init.has_listeners(model):
        return model(*values)
    obj = model.__new__(model)
    obj.__dict__.update(zip(_attnames(model), values, strict=True))
    obj._state = ModelState()
    return obj


@cache
def _attnames(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(f.attname for f in model._meta.concrete_fields)


def _waiting():
    """The SQLite engine's view of the writers waiting for the lock (memory.sqlite), else None."""
    conn = connections["default"]
    waiting = getattr(conn, "waiting", None)
    return waiting if waiting is not None and conn.connection is not None else None


def leave_the_lock() -> None:
    """Before each batch of a bulk write (the full import's and the history import's alike, and
    the steps of the index merge after them): on SQLite, give way to every writer waiting for the
    write lock — another person's line, or a turn under way — before the batch takes it (S4;
    memory.sqlite.waiting). Just before, not after the last batch: whoever began while the batch
    was made is seen. No one waiting, no pause."""
    waiting = _waiting()
    if waiting is not None:
        waiting.give_way()


def write_in_steps(items: Sequence, write: Callable[[Sequence], object]) -> None:
    """`write(part)` for the parts of one batch of `items` (STEP_ROWS each; each write leaves the
    database whole), in as few transactions as the others allow: all in one while no one waits
    for SQLite's write lock, and when someone begins to, the transaction commits after the part
    in hand and gives way before the next (S4, BENCH §5). A person's write waits for one part,
    not for the whole batch, while a lone import keeps its batches' size (a transaction's own
    cost is about a sixth of a thousand-line batch's). A part that fails rolls back itself and
    the parts after it in its transaction; those before were committed (`transaction.on_commit`
    tells a part when)."""
    parts = [items[i:i + STEP_ROWS] for i in range(0, len(items), STEP_ROWS)]
    done = 0
    while done < len(parts):
        leave_the_lock()
        with transaction.atomic():
            waiting = _waiting()
            while True:
                write(parts[done])
                done += 1
                if done == len(parts) or (waiting is not None and waiting.someone_waits()):
                    break


def _utc_text(conn) -> bool:
    """The backend stores an aware datetime as the text of its naive UTC value (SQLite with
    USE_TZ and the connection in UTC): `str(value)` of a UTC datetime less its "+00:00"."""
    return conn.vendor == "sqlite" and settings.USE_TZ and conn.timezone_name == "UTC"


def _converter(field: models.Field, conn) -> Callable[[Any], Any] | None:
    """Value -> database value for the fields whose values the driver cannot take as they are."""
    prep = field.get_db_prep_save
    if isinstance(field, models.JSONField):
        adapt_json, encoder = conn.ops.adapt_json_value, field.encoder
        # An empty object is the common legacy_extra; its JSON text needs no encoder.
        empty = adapt_json({}, encoder)
        return lambda v: None if v is None else (empty if v.__class__ is dict and not v else adapt_json(v, encoder))
    if isinstance(field, models.DateTimeField):
        adapt = conn.ops.adapt_datetimefield_value
        if _utc_text(conn):
            # What adapt gives for a UTC datetime (make_naive in UTC, then str), without the
            # conversions: the importer's times are nearly all parsed or made in UTC.
            return lambda v: (
                None if v is None
                else str(v)[:-6] if v.__class__ is datetime and v.tzinfo is UTC
                else adapt(v) if v.__class__ is datetime and v.tzinfo is not None
                else prep(v, conn)
            )
        return lambda v: adapt(v) if v.__class__ is datetime and v.tzinfo is not None else prep(v, conn)
    if isinstance(field, (models.CharField, models.TextField, models.IntegerField, models.ForeignKey)):
        return None
    return lambda v: prep(v, conn)


def reserve_pks(model: type[models.Model], n: int, *, using: str = "default") -> list[int]:
    """`n` primary keys for new rows of `model` that no other row has or will be given, to be
    inserted in this transaction (`insert_rows(..., with_pk=True)`). On SQLite the caller's
    transaction holds the write lock (`transaction_mode` IMMEDIATE), so the keys after the table's
    AUTOINCREMENT high-water mark stay free until it commits; on PostgreSQL they are drawn from
    the column's sequence."""
    conn = connections[using]
    if not conn.in_atomic_block:
        raise RuntimeError("reserve_pks runs inside the transaction that inserts the rows")
    if n <= 0:
        return []
    table, pk = model._meta.db_table, model._meta.pk.column
    qn = conn.ops.quote_name
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            cursor.execute(
                f"SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = %s), 0),"
                f" coalesce((SELECT max({qn(pk)}) FROM {qn(table)}), 0))", [table])
            top = cursor.fetchone()[0]
            return list(range(top + 1, top + 1 + n))
        if conn.vendor == "postgresql":
            cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                           [qn(table), pk, n])
            return [row[0] for row in cursor.fetchall()]
    raise NotImplementedError(f"reserve_pks on {conn.vendor}")


def insert_rows(model: type[models.Model], rows: Sequence[Any], *, using: str = "default",
                with_pk: bool = False) -> None:
    """INSERT every row, an object with one attribute per column of `model`: its pk excluded,
    or, `with_pk`, the `pk` each row holds (from `reserve_pks`)."""
    if not rows:
        return
    conn = connections[using]
    meta = model._meta
    fields = [f for f in meta.concrete_fields if with_pk or not f.primary_key]
    for f in fields:
        if isinstance(f, (models.DateField, models.TimeField)) and (f.auto_now or f.auto_now_add):
            raise ValueError(f"{meta.label}.{f.name} is computed at save time; use bulk_create")
    columns = attrgetter(*("pk" if f.primary_key else f.attname for f in fields))
    convs = [(i, c) for i, f in enumerate(fields) if (c := _converter(f, conn)) is not None]
    qn = conn.ops.quote_name
    sql = "INSERT INTO {} ({}) VALUES ({})".format(
        qn(meta.db_table), ", ".join(qn(f.column) for f in fields), ", ".join(["%s"] * len(fields))
    )
    with conn.cursor() as cursor:
        for start in range(0, len(rows), CHUNK):
            values = []
            for row in rows[start : start + CHUNK]:
                v = list(columns(row))
                for i, conv in convs:
                    v[i] = conv(v[i])
                values.append(v)
            cursor.executemany(sql, values)
