-- 06_kernel_key.sql: a kernel identity that survives recompilation (raw names stay in the data).
--
-- Scalar macros, three levels from fine to coarse (tw_kernel_key_numargs and
-- tw_kernel_key_drop_args are helpers: numeric template arguments -> N; the trailing argument
-- list removed):
--   tw_kernel_key_fine(name)   -> VARCHAR  the name without what changes on every build:
--                                          "(anonymous namespace)::" and a leading "void ",
--                                          lambda numbers ({lambda()#3} -> {lambda()#}), hash
--                                          runs (10+ hex digits after '_' or '.' -> '#'),
--                                          runs of blanks
--   tw_kernel_key_base(name)   -> VARCHAR  the fine key without a trailing numbered suffix
--                                          (triton_poi_fused_add_0 -> triton_poi_fused_add),
--                                          Triton signature suffixes (triton_0d1d2de), the function's
--                                          argument list, numeric template arguments (<4, F,
--                                          Array<char*, 3> > -> <N, F, Array<char*, N> >); for a
--                                          Tensile/rocBLAS GEMM (Cijk_...) the problem type and
--                                          its macro tile (..._MT128x128x32), without the other
--                                          tuning parameters
--   tw_kernel_key_coarse(name) -> VARCHAR  the base key; a Tensile GEMM without its macro tile
--
-- The per-run resolution of the levels is the view kernel_keys (07_kernel_keys.sql). These
-- macros alone are also loaded by the ingest (its workload fingerprint uses the base key).

CREATE OR REPLACE MACRO tw_kernel_key_fine(name) AS
    regexp_replace(
        regexp_replace(
            regexp_replace(tw_name_clean(name), '\{lambda\(([^)]*)\)#\d+\}', '{lambda(\1)#}', 'g'),
            '([_.])[0-9a-fA-F]{10,}([^0-9A-Za-z]|$)', '\1#\2', 'g'),
        '\s+', ' ', 'g');

CREATE OR REPLACE MACRO tw_kernel_key_numargs(s) AS
    regexp_replace(
        regexp_replace(s, '([<,]\s*)-?\d+[uUlL]*(\s*[,>])', '\1N\2', 'g'),
        '([<,]\s*)-?\d+[uUlL]*(\s*[,>])', '\1N\2', 'g');

CREATE OR REPLACE MACRO tw_kernel_key_drop_args(s) AS
    regexp_replace(
        s, '\s*\([^()]*(?:\([^()]*(?:\([^()]*\)[^()]*)*\)[^()]*)*\)\s*(?:const\s*)?$', '');

CREATE OR REPLACE MACRO tw_kernel_key_base(name) AS
    CASE
        WHEN name IS NULL THEN NULL
        WHEN regexp_matches(name, '^(?:Custom_)?Cijk_.*_MT\d+x\d+x\d+') THEN
            regexp_extract(name, '^((?:Custom_)?Cijk_.*?_MT\d+x\d+x\d+)', 1)
        ELSE coalesce(nullif(
            tw_kernel_key_numargs(
                regexp_replace(
                    CASE
                        WHEN regexp_matches(name, '^triton')
                            THEN regexp_replace(
                                tw_kernel_key_drop_args(tw_kernel_key_fine(name)),
                                '_?(?:\d+d+e?)+$', '')
                        ELSE tw_kernel_key_drop_args(tw_kernel_key_fine(name))
                    END,
                    '([A-Za-z#])_+\d+$', '\1')),
            ''), tw_kernel_key_fine(name))
    END;

CREATE OR REPLACE MACRO tw_kernel_key_coarse(name) AS
    CASE
        WHEN regexp_matches(name, '^(?:Custom_)?Cijk_.*_MT\d+x\d+x\d+') THEN
            regexp_extract(name, '^((?:Custom_)?Cijk_.*?)_MT\d+x\d+x\d+', 1)
        ELSE tw_kernel_key_base(name)
    END;
