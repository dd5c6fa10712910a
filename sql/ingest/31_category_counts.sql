-- per (phase/category) event counts of each run (file_no), for runs.category_counts_json
SELECT file_no, 'X/' || coalesce(cat, '') AS k, count(*) AS n FROM s_ev GROUP BY ALL
UNION ALL SELECT file_no, 'X/' || coalesce(cat, ''), count(*) FROM s_py GROUP BY ALL
UNION ALL SELECT file_no, coalesce(ph, '?') || '/' || coalesce(cat, ''), count(*) FROM s_inst
    GROUP BY ALL
UNION ALL SELECT file_no, 'C/' || coalesce(cat, ''), count(DISTINCT event_index) FROM s_cnt
    GROUP BY ALL
UNION ALL SELECT file_no, ph || '/' || coalesce(cat, ''), count(*) FROM s_flow GROUP BY ALL
UNION ALL SELECT file_no, 'M/', count(*) FROM s_thr GROUP BY ALL
ORDER BY 1, 2
