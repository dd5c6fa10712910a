-- The output tables (2x/3x_out_*.sql) whose rows are certainly none: those whose driving
-- relation (the one each output query reads, inner-joined to t_files) is empty. Not an
-- analysis view: run by tracewh.ingest before the outputs are written, so that a run skips
-- the COPY of a table it has no rows of (~5-8 ms of DuckDB planning and writing each; the
-- COPY would write no file either). A table not listed here is always written.
--
-- grain: one row per output table known to be empty
-- out_table  the table's name (as in tracewh.ingest.link.OUT_TABLES)
SELECT 'steps' AS out_table WHERE NOT EXISTS (FROM t_steps)                -- 22_out_steps
UNION ALL SELECT 'instants' WHERE NOT EXISTS (FROM s_inst)                 -- 23_out_instants
UNION ALL SELECT 'counters' WHERE NOT EXISTS (FROM s_cnt)                  -- 24_out_counters
UNION ALL SELECT 'flows' WHERE NOT EXISTS (FROM s_flow)                    -- 25_out_flows
UNION ALL SELECT 'flow_args' WHERE NOT EXISTS (FROM s_flow)                -- 28_out_flow_args
UNION ALL SELECT 'python' WHERE NOT EXISTS (FROM s_py)                     -- 26_out_python
UNION ALL SELECT 'module_spans' WHERE NOT EXISTS (FROM t_mod_tree)         -- 29_out_module_spans
UNION ALL SELECT 'annotation_spans' WHERE NOT EXISTS (FROM t_ann_tree)     -- 32_out_annotation_spans
UNION ALL SELECT 'graph_nodes' WHERE NOT EXISTS (FROM t_graph_nodes)       -- 33_out_graph_nodes
UNION ALL SELECT 'collectives' WHERE NOT EXISTS (FROM s_gev)               -- 34_out_collectives
UNION ALL SELECT 'threads' WHERE NOT EXISTS (FROM s_thr)                   -- 27_out_threads
