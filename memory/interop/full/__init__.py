"""The phases of the full import of our own export (entry point: memory.interop.full_import.import_full):

1. read (`read`): the export's top level and its profiles, one at a time as the file streams;
2. check (`check`): every record against the schema, and every row the write would make
   against what the database takes (X4, S5) — the dry run is this phase alone;
3. write (`write`): the rows, deduplicated by id against what the profile holds, tombstones
   first, in short batches each in its own transaction (S4);
4. report (`report`): the per-kind counts and notes, and the refusals.
"""
