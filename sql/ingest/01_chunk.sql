-- One chunk of prepared events (a JSON array written by tracewh.ingest.shred), typed.
-- Not an analysis view. Param: $file. Keys set by the Python pass:
-- _i (event index in the part), ts/dur (exact int ns), pid_label/tid_label,
-- _c/_e/_s/_d (correlation, External id, stream, device popped from args),
-- _py/_pp (Python id / parent id), _f (flow id), _raw (a non-object event).
--
-- c  one row per event of the chunk
CREATE OR REPLACE TEMP TABLE c AS
SELECT * FROM read_json($file, format = 'array', maximum_object_size = 33554432,
    columns = {_i: 'BIGINT', ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR',
               pid: 'HUGEINT', tid: 'HUGEINT', pid_label: 'VARCHAR', tid_label: 'VARCHAR',
               ts: 'BIGINT', dur: 'BIGINT', args: 'JSON', s: 'VARCHAR', bp: 'VARCHAR',
               _c: 'BIGINT', _e: 'BIGINT', _s: 'BIGINT', _d: 'BIGINT',
               _py: 'BIGINT', _pp: 'BIGINT', _f: 'BIGINT', _raw: 'VARCHAR'})
