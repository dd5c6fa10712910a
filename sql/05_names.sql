-- 05_names.sql: kernel naming and classification rules (one place for all of them).
--
-- Scalar macros (called by the ingest on the DISTINCT names of a trace, then joined
-- back, and usable in ad-hoc queries):
--   tw_op_kind(cat, name)      -> VARCHAR  kernel | memcpy | memset | other
--   tw_memcpy_kind(name)       -> VARCHAR  the copy direction as written ("HtoD", "DtoH",
--                                          "DtoD", "PtoP", "HtoH", ...); NULL when not a copy
--   tw_short_name(name)        -> VARCHAR  readable kernel name: return type, templates <...>,
--                                          argument lists (...), namespaces stripped
--   tw_launch_kind(name)       -> VARCHAR  what a runtime call enqueues: graph (a CUDA/HIP
--                                          graph launch), memcpy, memset, kernel (a kernel
--                                          launch), other (any other call); NULL for NULL
--   tw_category(name, cat)     -> VARCHAR  gemm | attention | conv | norm | elementwise |
--                                          reduction | communication | memcpy_HtoD |
--                                          memcpy_DtoH | memcpy_DtoD | memcpy_PtoP |
--                                          memset | triton | other
--   tw_collective(coll, name)  -> VARCHAR  the collective of a communication kernel: all_reduce |
--                                          all_gather | reduce_scatter | all_to_all | broadcast |
--                                          reduce | gather | scatter | send_recv | send | recv |
--                                          barrier | other; from its "Collective name" arg
--                                          (coll: allreduce, _allgather_base, reduce_scatter_
--                                          tensor_coalesced, ...) else from the kernel name
--                                          (ncclDevKernel_AllGather_RING_LL, rccl/msccl names,
--                                          vLLM's cross_device_reduce_* custom all-reduce)
--   tw_dtype_bytes(dtype)      -> BIGINT   bytes per element of a PyTorch scalar type as the
--                                          collective args write it (Float 4, BFloat16 2, ...);
--                                          NULL when unknown
-- Helpers (implementation details of the above):
--   tw_name_clean(name)        -> VARCHAR  name without "(anonymous namespace)::", without a
--                                          leading "void " / "std::enable_if<...>::type "
--   tw_strip_ns(s)             -> VARCHAR  last "::" component of s
--   tw_first_targ(clean)       -> VARCHAR  first template argument, namespaces stripped
--   tw_short_core(name, clean, head) -> VARCHAR  short name before the final clean-up
--   tw_category_of(l, name, kind)    -> VARCHAR  category from the lower-cased name and op_kind
--   tw_collective_of(k)              -> VARCHAR  collective from a lower-cased name without '_'
--
-- Memcpy categories are spelled memcpy_<kind> with the Kineto kind (HtoD, DtoH, DtoD, PtoP).
-- Array kinds map to their device side (HtoA -> HtoD, AtoH -> DtoH, AtoA/AtoD/DtoA -> DtoD);
-- other kinds (HtoH, unknown) and MTIA dma_request get category "other" (memcpy_kind keeps
-- what the trace wrote, and op_kind stays "memcpy").
-- Category rules are tried in this order, on the lower-cased full name with "fbgemm" masked
-- (FBGEMM embedding kernels are not GEMMs), first match wins: memcpy/memset (by op_kind),
-- communication, triton, attention, norm, conv (cuDNN kernels that are not norm count as
-- conv), gemm, elementwise by kernel template (elementwise_kernel, vectorized_*,
-- unrolled_*, index*, multi_tensor_apply), other by name (embedding, sort, bucketize,
-- searchsorted, unique), reduction (reduce, softmax, pooling, scan, ...), elementwise by
-- operation (add, mul, copy, fill, activations, ...), other.

CREATE OR REPLACE MACRO tw_launch_kind(name) AS
    CASE
        WHEN name IS NULL THEN NULL
        WHEN regexp_matches(name, '^(?:cuda|hip|cu)GraphLaunch') THEN 'graph'
        WHEN contains(name, 'Memcpy') THEN 'memcpy'
        WHEN contains(name, 'Memset') THEN 'memset'
        WHEN regexp_matches(name, 'Launch(?:Cooperative)?Kernel|^mtia\w*(?:Launch|Enqueue)')
            THEN 'kernel'
        ELSE 'other'
    END;

CREATE OR REPLACE MACRO tw_op_kind(cat, name) AS
    CASE
        WHEN cat IN ('gpu_memcpy', 'Memcpy') THEN 'memcpy'
        WHEN cat IN ('gpu_memset', 'Memset') THEN 'memset'
        WHEN cat IN ('kernel', 'Kernel') THEN 'kernel'
        WHEN cat = 'mtia_ccp_events' THEN
            CASE
                WHEN name = 'dma_request' THEN 'memcpy'
                WHEN name IN ('event_record', 'event_wait') THEN 'other'
                ELSE 'kernel'
            END
        WHEN name LIKE 'Memcpy%' THEN 'memcpy'
        WHEN name LIKE 'Memset%' THEN 'memset'
        ELSE 'other'
    END;

CREATE OR REPLACE MACRO tw_memcpy_kind(name) AS
    nullif(regexp_extract(name, '^Memcpy ([A-Za-z]+to[A-Za-z]+)', 1), '');

CREATE OR REPLACE MACRO tw_name_clean(name) AS
    regexp_replace(
        regexp_replace(
            regexp_replace(trim(name), '\(anonymous namespace\)::', '', 'g'),
            '^(?:std::enable_if<.*?>::type\s+|__global__\s+void\s+|void\s+)', ''),
        '^void\s+', '');

CREATE OR REPLACE MACRO tw_strip_ns(s) AS
    trim(regexp_extract(trim(s), '([^:]*)$', 1));

-- first template argument of a cleaned name, namespaces stripped
CREATE OR REPLACE MACRO tw_first_targ(clean) AS
    tw_strip_ns(regexp_extract(clean, '^[^<(]*<\s*([^<>,(]*)', 1));

CREATE OR REPLACE MACRO tw_short_core(name, clean, head) AS
    CASE
        WHEN name IS NULL THEN NULL
        -- Tensile / rocBLAS GEMMs: keep the layout, data type and macro tile
        WHEN regexp_matches(name, '^(?:Custom_)?Cijk_') THEN
            regexp_extract(name, '^((?:Custom_)?Cijk_[^_]+_[^_]+_[^_]+)', 1)
            || coalesce('_' || nullif(regexp_extract(name, '_(MT\d+x\d+x\d+)', 1), ''), '')
        -- Itanium-mangled names: the first CamelCase identifier of two words or more
        WHEN name LIKE '\_Z%' ESCAPE '\' THEN
            coalesce(
                nullif(regexp_extract(name, '([A-Z][a-z]+(?:[A-Z][a-z]+)+)', 1), ''),
                nullif(regexp_extract(name, '^_ZN?\d+([A-Za-z_]+)', 1), ''),
                name)
        -- generic template kernels (cutlass::Kernel<cutlass_80_..._gemm_...>): the first
        -- template argument is the distinguishing core; else keep the enclosing namespace
        WHEN lower(tw_strip_ns(head)) IN ('kernel', 'kernel2') THEN
            CASE
                WHEN regexp_matches(tw_first_targ(clean), '^[A-Za-z_][A-Za-z0-9_]*$')
                    AND tw_first_targ(clean) NOT IN (
                        'int', 'long', 'unsigned', 'float', 'double', 'half', 'bool', 'char',
                        'short', 'bfloat16', 'true', 'false')
                THEN tw_first_targ(clean)
                ELSE coalesce(nullif(regexp_extract(head, '([^:]+)::[^:]*$', 1), '') || '::', '')
                    || tw_strip_ns(head)
            END
        ELSE tw_strip_ns(head)
    END;

CREATE OR REPLACE MACRO tw_short_name(name) AS
    CASE
        WHEN name IS NULL THEN NULL
        ELSE coalesce(
            nullif(trim(regexp_replace(
                regexp_replace(
                    tw_short_core(name, tw_name_clean(name),
                                  trim(regexp_extract(tw_name_clean(name), '^[^<(]*', 0))),
                    '-(?:dtype|extraKey)_.*$', ''),
                '[<>()]', '', 'g')), ''),
            nullif(trim(regexp_replace(name, '[<>()]+', '_', 'g')), ''),
            'unnamed')
    END;

CREATE OR REPLACE MACRO tw_category_of(l, name, kind) AS
    CASE
        WHEN kind = 'memcpy' THEN
            CASE tw_memcpy_kind(name)
                WHEN 'HtoD' THEN 'memcpy_HtoD'
                WHEN 'HtoA' THEN 'memcpy_HtoD'
                WHEN 'DtoH' THEN 'memcpy_DtoH'
                WHEN 'AtoH' THEN 'memcpy_DtoH'
                WHEN 'DtoD' THEN 'memcpy_DtoD'
                WHEN 'AtoA' THEN 'memcpy_DtoD'
                WHEN 'AtoD' THEN 'memcpy_DtoD'
                WHEN 'DtoA' THEN 'memcpy_DtoD'
                WHEN 'PtoP' THEN 'memcpy_PtoP'
                ELSE 'other'
            END
        WHEN kind = 'memset' THEN 'memset'
        WHEN regexp_matches(l, 'nccl|rccl|hccl|msccl|c10d::|cross_device_reduce|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv|send_recv|collective')
            THEN 'communication'
        WHEN regexp_matches(l, 'triton') THEN 'triton'
        WHEN regexp_matches(l, 'flash|fmha|attention|attn|sdpa|_mha_|xformers|cutlassf|cutlassb|paged_?kv|decode_?mha')
            THEN 'attention'
        WHEN regexp_matches(l, 'layer_?norm|batch_?norm|group_?norm|rms_?norm|instance_?norm|bn_fw|bn_bw|bnfwd|bnbwd|gammabeta|rowwisemoments|compute_?stats|miopenbatchnorm')
            THEN 'norm'
        WHEN regexp_matches(l, 'conv|dgrad|wgrad|fprop|winograd|implicit_?gemm|scudnn|cudnn|cask_|fft2d|fft_|im2col|col2im|miopen|igemm_|naive_conv|gridwise_')
            THEN 'conv'
        WHEN regexp_matches(l, 'gemm|gemv|matmul|cublas|cutlass|magma|splitkreduce|cijk_|nvjet|wgmma|hipblas|rocblas|(^|[^a-z])(mm|bmm|addmm|baddbmm|linear|fc)([^a-z]|$)|^(ampere|volta|turing|hopper|sm\d+)_[a-z0-9]*gemm')
            THEN 'gemm'
        WHEN regexp_matches(l, 'elementwise_kernel|^(?:void )?(?:[a-z_]+::)*(?:vectorized|unrolled|index)_?|multi_tensor_apply')
            THEN 'elementwise'
        WHEN regexp_matches(l, 'embedding|embs_|bucketize|sort|searchsorted|unique')
            THEN 'other'
        WHEN regexp_matches(l, 'reduce|reduction|softmax|max_pool|avg_pool|average_pool|adaptive_avg|adaptive_max|pooling|argmax|argmin|cumsum|scan|norm_two|vector_norm|sum_functor|meanops|mean\.|max_dim|min_dim|topk|logsumexp|welford|\bsum\b')
            THEN 'reduction'
        WHEN regexp_matches(l, 'elementwise|vectorized|unrolled|multi_tensor|functor|fill|copy|catarray|cat\.out|where|clamp|clip|threshold|relu|gelu|silu|swish|sigmoid|tanh|sqrt|reciprocal|neg|abs|sign|exp|log|pow|add|mul|div|sub|dropout|masked|nan_to_num|cast|convert|to_dense|fp8|quantize|arange|index|gather|scatter|compare|logical|eq_kernel|mse|bce|permute|transpose|(^|[^a-z])(gt|lt|ge|le|eq|ne)\.')
            THEN 'elementwise'
        ELSE 'other'
    END;

CREATE OR REPLACE MACRO tw_category(name, cat) AS
    tw_category_of(replace(lower(coalesce(name, '')), 'fbgemm', 'fbg'), name, tw_op_kind(cat, name));

CREATE OR REPLACE MACRO tw_collective_of(k) AS
    CASE
        WHEN k IS NULL OR k = '' THEN NULL
        WHEN regexp_matches(k, 'crossdevicereduce|customallreduce|allreduce') THEN 'all_reduce'
        WHEN regexp_matches(k, 'reducescatter') THEN 'reduce_scatter'
        WHEN regexp_matches(k, 'allgather') THEN 'all_gather'
        WHEN regexp_matches(k, 'alltoall') THEN 'all_to_all'
        WHEN regexp_matches(k, 'broadcast|bcast') THEN 'broadcast'
        WHEN regexp_matches(k, 'sendrecv') THEN 'send_recv'
        WHEN regexp_matches(k, 'recv') THEN 'recv'
        WHEN regexp_matches(k, 'send') THEN 'send'
        WHEN regexp_matches(k, 'barrier') THEN 'barrier'
        WHEN regexp_matches(k, 'reduce') THEN 'reduce'
        WHEN regexp_matches(k, 'gather') THEN 'gather'
        WHEN regexp_matches(k, 'scatter') THEN 'scatter'
    END;

CREATE OR REPLACE MACRO tw_collective(coll, name) AS
    coalesce(tw_collective_of(replace(lower(coll), '_', '')),
             tw_collective_of(replace(lower(name), '_', '')),
             'other');

CREATE OR REPLACE MACRO tw_dtype_bytes(dtype) AS
    CASE replace(replace(lower(coalesce(dtype, '')), 'torch.', ''), '_', '')
        WHEN 'float' THEN 4 WHEN 'float32' THEN 4 WHEN 'int' THEN 4 WHEN 'int32' THEN 4
        WHEN 'uint32' THEN 4 WHEN 'qint32' THEN 4
        WHEN 'double' THEN 8 WHEN 'float64' THEN 8 WHEN 'long' THEN 8 WHEN 'int64' THEN 8
        WHEN 'uint64' THEN 8 WHEN 'complexfloat' THEN 8 WHEN 'complexdouble' THEN 16
        WHEN 'half' THEN 2 WHEN 'float16' THEN 2 WHEN 'bfloat16' THEN 2 WHEN 'short' THEN 2
        WHEN 'int16' THEN 2 WHEN 'uint16' THEN 2 WHEN 'complexhalf' THEN 4
        WHEN 'char' THEN 1 WHEN 'byte' THEN 1 WHEN 'bool' THEN 1 WHEN 'int8' THEN 1
        WHEN 'uint8' THEN 1 WHEN 'qint8' THEN 1 WHEN 'quint8' THEN 1
        ELSE CASE WHEN starts_with(replace(lower(coalesce(dtype, '')), '_', ''), 'float8') THEN 1 END
    END;
