-- per (phase/category) event counts of one run, for runs.category_counts_json
SELECT 'X/' || coalesce(cat, '') AS k, count(*) AS n FROM s_ev GROUP BY ALL
UNION ALL SELECT 'X/' || coalesce(cat, ''), count(*) FROM s_py GROUP BY ALL
UNION ALL SELECT coalesce(ph, '?') || '/' || coalesce(cat, ''), count(*) FROM s_inst GROUP BY ALL
UNION ALL SELECT 'C/' || coalesce(cat, ''), count(DISTINCT event_index) FROM s_cnt GROUP BY ALL
UNION ALL SELECT ph || '/' || coalesce(cat, ''), count(*) FROM s_flow GROUP BY ALL
UNION ALL SELECT 'M/', count(*) FROM s_thr HAVING count(*) > 0
ORDER BY 1
