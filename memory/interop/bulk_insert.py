"""Plain `executemany` inserts for the importer's big tables (BENCH.md §3).

`QuerySet.bulk_create` spends most of its time compiling one multi-row INSERT per batch
(a placeholder and a prepared value per field per row, through the query compiler). The
importer writes tens of thousands of rows of a few models, so it prepares each row once
here and hands the database driver a single one-row INSERT to execute many times.

What stays the same as bulk_create: the instances are built by the model as usual (so
Python-level defaults are filled in), related fields are checked and resolved the way
bulk_create does it, every value goes through the field's own `get_db_prep_save` unless
it is already a plain str / int / aware datetime that the field would pass through, rows
are inserted in list order, and database constraints are enforced by the database. It
runs in the caller's transaction. What differs: primary keys are not returned; a caller
that needs them reads them back by a unique key (see kv_import.write_plan).

Anything this cannot do exactly -- an instance with its pk set, a value that is an
expression or DatabaseDefault, a field with auto_now / auto_now_add -- falls back to
bulk_create, and so the return value says whether the pks are already set.
"""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import connections, models
from django.db.models.expressions import BaseExpression

CHUNK = 5000


def _converter(field: models.Field, conn) -> Callable[[Any], Any]:
    """Value -> database value, as `field.get_db_prep_save` gives it, skipping its no-op cases."""
    prep = field.get_db_prep_save
    if isinstance(field, (models.CharField, models.TextField)):
        return lambda v: v if v is None or v.__class__ is str else prep(v, conn)
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    if isinstance(target, models.IntegerField):  # AutoFields included (ForeignKey targets)
        return lambda v: v if v is None or v.__class__ is int else prep(v, conn)
    if (
        isinstance(field, models.JSONField)
        and type(field).get_db_prep_save is models.JSONField.get_db_prep_save
        and type(field).get_db_prep_value is models.JSONField.get_db_prep_value
        and type(field).get_prep_value is models.Field.get_prep_value
    ):
        adapt_json, encoder = conn.ops.adapt_json_value, field.encoder
        # A dict or list goes straight to the backend's JSON adapter, as get_db_prep_save does.
        return lambda v: adapt_json(v, encoder) if v.__class__ is dict or v.__class__ is list else prep(v, conn)
    if isinstance(field, models.DateTimeField) and not (field.auto_now or field.auto_now_add):
        adapt = conn.ops.adapt_datetimefield_value
        # An aware datetime passes DateTimeField.get_prep_value unchanged.
        return lambda v: adapt(v) if v.__class__ is datetime and v.tzinfo is not None else prep(v, conn)
    return lambda v: prep(v, conn)


def _plain(model: type[models.Model]) -> bool:
    """No field computes its value at save time (pre_save is a plain attribute read)."""
    for f in model._meta.concrete_fields:
        if isinstance(f, models.DateField):
            if f.auto_now or f.auto_now_add:
                return False
        elif type(f).pre_save is not models.Field.pre_save:
            return False
    return True


def bulk_insert(model: type[models.Model], objs: Sequence[models.Model], *, using: str = "default") -> bool:
    """Insert `objs` (all new, all of `model`); True when their pks were NOT set (raw path)."""
    if not objs:
        return True
    conn = connections[using]
    meta = model._meta
    pk = meta.pk
    fields = [f for f in meta.concrete_fields if f is not pk]
    if not _plain(model) or any(o.pk is not None for o in objs):
        model._default_manager.using(using).bulk_create(objs, batch_size=1000)
        return False
    attnames = [f.attname for f in fields]
    # Any expression (DatabaseDefault, F(), ...) needs the compiler: let bulk_create do it all.
    for o in objs:
        d = o.__dict__
        for a in attnames:
            if isinstance(d.get(a), BaseExpression):
                model._default_manager.using(using).bulk_create(objs, batch_size=1000)
                return False
    convs = [_converter(f, conn) for f in fields]
    relations = [(f.name, f.attname) for f in fields if f.is_relation]
    pairs = list(zip(attnames, convs, strict=True))
    qn = conn.ops.quote_name
    sql = "INSERT INTO {} ({}) VALUES ({})".format(
        qn(meta.db_table), ", ".join(qn(f.column) for f in fields), ", ".join(["%s"] * len(fields))
    )
    with conn.cursor() as cursor:
        for start in range(0, len(objs), CHUNK):
            chunk = objs[start : start + CHUNK]
            rows = []
            for o in chunk:
                d = o.__dict__
                cache = o._state.fields_cache
                for name, attname in relations:
                    # Django's check only acts when a cached related object disagrees with
                    # the id column (unsaved, saved after assignment, or reassigned).
                    rel = cache.get(name)
                    if rel is not None and (rel.pk is None or rel.pk != d[attname]):
                        o._prepare_related_fields_for_save(operation_name="bulk_create")
                        break
                rows.append(tuple([conv(d[a]) for a, conv in pairs]))
            cursor.executemany(sql, rows)
    for o in objs:
        o._state.adding = False
        o._state.db = using
    return True


class InstanceFactory:
    """`factory(**values)` == `model(**values)` for column values, built faster.

    Model.__init__ with keyword arguments walks every field, popping and type-checking;
    with one positional argument per concrete field it just sets each attribute (the path
    Django itself uses to load rows). This fills in the defaults the keyword path would
    use -- a field's own default, called per instance when it is a factory such as
    `dict` -- and takes the positional path. Keys that are not column attnames (a related
    object, a property) go to the keyword path unchanged.
    """

    def __init__(self, model: type[models.Model]):
        self.model = model
        fields = model._meta.concrete_fields
        self.simple = len(fields) == len(model._meta.fields) and not any(
            getattr(f, "generated", False) for f in fields
        )
        self.index = {f.attname: i for i, f in enumerate(fields)}
        self.template: list = []
        self.factories: list[tuple[int, Callable[[], Any]]] = []
        for i, f in enumerate(fields):
            first, second = f.get_default(), f.get_default()
            if first is second and (first is None or first.__class__ in (str, int, float, bool)):
                self.template.append(first)
            else:  # a fresh value per instance (dict(), DatabaseDefault(...), ...)
                self.template.append(None)
                self.factories.append((i, f.get_default))

    def __call__(self, **values: Any) -> models.Model:
        index = self.index
        if not self.simple or not all(k in index for k in values):
            return self.model(**values)
        args = self.template.copy()
        for i, make in self.factories:
            args[i] = make()
        for k, v in values.items():
            args[index[k]] = v
        return self.model(*args)
