-- 99_catalog.sql: what a query can read from, each name once (`SHOW TABLES` in `tracewh sql`).
--
-- warehouse_objects  (view)
--   grain: one row per name a query can read from: a warehouse table, a view or a table macro
--          of the session, each name once (DuckDB's own catalog lists each raw_<table> twice:
--          the catalog's empty table and the session's view over the snapshot's files), except
--          tracewh's bookkeeping (tracewh_catalog and the tw_* tables and helpers).
--   columns: name, kind
--   kind: 'table' (a warehouse table: its visible rows, those of the runs readers see),
--         'raw table' (raw_<table>: every row of the table's files, visible or not),
--         'view', or 'table macro' (a view taking parameters: SELECT * FROM name(...)).
--   `tracewh sql "SHOW TABLES"` lists this view, ordered by name; `tracewh schema` describes
--   each object (columns, grain, definitions).

CREATE OR REPLACE VIEW warehouse_objects AS
WITH objects AS (
    SELECT name, min(rank) AS rank
    FROM (
        SELECT table_name AS name, 1 AS rank FROM duckdb_tables() WHERE NOT internal
        UNION ALL
        SELECT view_name, 2 FROM duckdb_views() WHERE NOT internal
        UNION ALL
        SELECT function_name, 3 FROM duckdb_functions()
        WHERE function_type = 'table_macro' AND NOT internal
    )
    WHERE name <> 'tracewh_catalog' AND NOT starts_with(name, 'tw_')
    GROUP BY name
)
SELECT o.name,
       CASE
           WHEN o.name LIKE 'raw\_%' ESCAPE '\' AND o.rank <= 2 THEN 'raw table'
           WHEN o.rank <= 2 AND EXISTS (SELECT 1 FROM objects r WHERE r.name = 'raw_' || o.name)
               THEN 'table'
           WHEN o.rank = 1 THEN 'table'
           WHEN o.rank = 2 THEN 'view'
           ELSE 'table macro'
       END AS kind
FROM objects o;
