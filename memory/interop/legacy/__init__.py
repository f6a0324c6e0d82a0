"""The phases of the legacy KV migration (entry point: memory.interop.kv_import.import_kv):

1. read (`read`): stream the dump, classify each key by its kind (`kinds`), parse and check it;
2. plan (`plan`): tombstones first, then messages, curation and meta keys, against what the
   database already holds, so a re-import plans nothing;
3. write (`write`): one transaction, plain bulk inserts, slices in one pass, index in bulk;
4. report (`report`): the per-family table and notes.
"""
