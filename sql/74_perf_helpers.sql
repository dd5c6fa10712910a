-- 74_perf_helpers.sql: scalar helpers of the performance model (75_perfmodel.sql): dtype labels
-- and sizes from Kineto's "Input type" strings and c10::ScalarType codes, shapes, broadcasting,
-- contiguity from "Input Strides".
--
-- tw_dtype(type_name)  (scalar macro)
--   the dtype label of a Kineto "Input type" entry: 'c10::BFloat16' -> bf16, 'c10::Half' ->
--   fp16, 'float' -> fp32, 'double' -> fp64, 'c10::Float8_e4m3fn' -> fp8_e4m3fn (and the other
--   fp8 variants), 'signed char' -> int8, 'unsigned char' -> uint8, 'long int' -> int64,
--   'bool' -> bool, ...; NULL for what is not a tensor dtype ('Scalar', 'ScalarList',
--   'TensorList', '').
-- tw_scalar_type(code)  (scalar macro)
--   the dtype label of a c10::ScalarType number as Concrete Inputs write it ('15' -> bf16,
--   '6' -> fp32, '24' -> fp8_e4m3fn, ...); NULL for anything else.
-- tw_dtype_bytes(dtype)  (scalar macro)
--   bytes per element of a dtype label (fp4_e2m1fn_x2: 1 byte per recorded, packed element).
-- tw_roof_dtype(dtype)  (scalar macro)
--   the device-peak column a matrix op of that dtype is compared with: fp8 variants -> fp8,
--   int8/uint8 -> int8, fp32/fp16/bf16 as is, anything else NULL (no peak).
-- tw_numel(shape)  (scalar macro)
--   number of elements of a shape (BIGINT[]): the product of its sizes, 1 for a 0-dim shape [].
-- tw_shape(json)  (scalar macro)
--   one "Input Dims" entry as BIGINT[]; NULL when it is not a flat list of sizes (TensorList).
-- tw_int_list(text)  (scalar macro)
--   a Concrete Input holding an int list ('[16, 16]') or one int ('1') as BIGINT[].
-- tw_pad_shape(s, n)  (scalar macro)
--   shape `s` with 1s prepended to n dims (broadcast alignment).
-- tw_broadcast(a, b)  (scalar macro)
--   the broadcast shape of two shapes (aligned on the right; a size-1 dim takes the other's).
-- tw_contiguous(shape, strides)  (scalar macro)
--   whether a tensor is row-major dense: every dim of size > 1 and stride > 0 has the stride
--   equal to the product of the later dims' sizes (later broadcast dims, stride 0, excluded);
--   NULL when the strides are unknown. Size-1 and broadcast (stride-0) dims never make a
--   tensor non-contiguous.
-- tw_swap_last2(x)  (scalar macro)
--   a list with its last two entries swapped (a shape or strides of a transposed view).
-- tw_gemm_layout_ok(shape, strides)  (scalar macro)
--   a GEMM operand BLAS reads natively: contiguous, or contiguous with its last two dims
--   swapped (a transposed view, e.g. nn.Linear's weight in addmm).
--
-- Each macro names its arguments once: its body is a lambda over a one-element list
-- (`list_transform([arg], lambda tw_x: ...)[1]`, a parameter name of its own). A macro's body is pasted at every call with
-- each argument written out as many times as the body names it, so nested calls on computed
-- shapes grew to thousands of expressions and DuckDB spent most of a roofline query planning
-- them (tw_gemm_layout_ok of a parsed shape: 40 ms to plan, 8 ms this way).

CREATE OR REPLACE MACRO tw_dtype(type_name) AS list_transform([lower(type_name)], lambda tw_dt: CASE tw_dt
    WHEN 'float' THEN 'fp32'
    WHEN 'double' THEN 'fp64'
    WHEN 'c10::half' THEN 'fp16'
    WHEN 'c10::bfloat16' THEN 'bf16'
    WHEN 'c10::float8_e4m3fn' THEN 'fp8_e4m3fn'
    WHEN 'c10::float8_e4m3fnuz' THEN 'fp8_e4m3fnuz'
    WHEN 'c10::float8_e5m2' THEN 'fp8_e5m2'
    WHEN 'c10::float8_e5m2fnuz' THEN 'fp8_e5m2fnuz'
    WHEN 'c10::float8_e8m0fnu' THEN 'fp8_e8m0fnu'
    WHEN 'c10::float4_e2m1fn_x2' THEN 'fp4_e2m1fn_x2'
    WHEN 'signed char' THEN 'int8'
    WHEN 'unsigned char' THEN 'uint8'
    WHEN 'short int' THEN 'int16'
    WHEN 'short' THEN 'int16'
    WHEN 'int' THEN 'int32'
    WHEN 'long int' THEN 'int64'
    WHEN 'long long int' THEN 'int64'
    WHEN 'long' THEN 'int64'
    WHEN 'bool' THEN 'bool'
    WHEN 'c10::complex<c10::half>' THEN 'complex32'
    WHEN 'c10::complex<float>' THEN 'complex64'
    WHEN 'c10::complex<double>' THEN 'complex128'
    ELSE NULL
END)[1];

CREATE OR REPLACE MACRO tw_scalar_type(code) AS list_transform([trim(CAST(code AS VARCHAR))], lambda tw_st: CASE tw_st
    WHEN '0' THEN 'uint8'
    WHEN '1' THEN 'int8'
    WHEN '2' THEN 'int16'
    WHEN '3' THEN 'int32'
    WHEN '4' THEN 'int64'
    WHEN '5' THEN 'fp16'
    WHEN '6' THEN 'fp32'
    WHEN '7' THEN 'fp64'
    WHEN '8' THEN 'complex32'
    WHEN '9' THEN 'complex64'
    WHEN '10' THEN 'complex128'
    WHEN '11' THEN 'bool'
    WHEN '15' THEN 'bf16'
    WHEN '23' THEN 'fp8_e5m2'
    WHEN '24' THEN 'fp8_e4m3fn'
    WHEN '25' THEN 'fp8_e5m2fnuz'
    WHEN '26' THEN 'fp8_e4m3fnuz'
    WHEN '44' THEN 'fp8_e8m0fnu'
    WHEN '45' THEN 'fp4_e2m1fn_x2'
    ELSE NULL
END)[1];

CREATE OR REPLACE MACRO tw_dtype_bytes(dtype) AS list_transform([dtype], lambda tw_db: CASE
    WHEN tw_db = 'complex128' THEN 16
    WHEN tw_db IN ('fp64', 'int64', 'complex64') THEN 8
    WHEN tw_db IN ('fp32', 'int32', 'complex32') THEN 4
    WHEN tw_db IN ('fp16', 'bf16', 'int16') THEN 2
    WHEN tw_db IN ('int8', 'uint8', 'bool') OR tw_db LIKE 'fp8%' OR tw_db LIKE 'fp4%' THEN 1
    ELSE NULL
END)[1];

CREATE OR REPLACE MACRO tw_roof_dtype(dtype) AS list_transform([dtype], lambda tw_rd: CASE
    WHEN tw_rd LIKE 'fp8%' THEN 'fp8'
    WHEN tw_rd IN ('int8', 'uint8') THEN 'int8'
    WHEN tw_rd IN ('fp32', 'fp16', 'bf16') THEN tw_rd
    ELSE NULL
END)[1];

CREATE OR REPLACE MACRO tw_numel(shape) AS list_transform([shape], lambda tw_ne: CASE
    WHEN tw_ne IS NULL THEN NULL
    WHEN len(tw_ne) = 0 THEN CAST(1 AS BIGINT)
    ELSE CAST(list_reduce(tw_ne, lambda a, b: a * b) AS BIGINT)
END)[1];

CREATE OR REPLACE MACRO tw_shape(j) AS list_transform([TRY_CAST(j AS BIGINT[])], lambda tw_sh: CASE
    WHEN len(list_filter(tw_sh, lambda tw_e: tw_e IS NULL)) = 0 THEN tw_sh
END)[1];

CREATE OR REPLACE MACRO tw_int_list(t) AS list_transform([t], lambda tw_il: coalesce(
    TRY_CAST(tw_il AS BIGINT[]),
    CASE WHEN TRY_CAST(tw_il AS BIGINT) IS NOT NULL THEN [TRY_CAST(tw_il AS BIGINT)] END
))[1];

CREATE OR REPLACE MACRO tw_pad_shape(s, n) AS list_transform([{'s': s, 'n': n}], lambda tw_ps:
    list_concat(list_resize(CAST([] AS BIGINT[]), tw_ps.n - len(tw_ps.s), 1), tw_ps.s))[1];

CREATE OR REPLACE MACRO tw_broadcast(a, b) AS list_transform([{'a': a, 'b': b}], lambda tw_bc: CASE
    WHEN tw_bc.a IS NULL OR tw_bc.b IS NULL THEN NULL
    ELSE list_transform(
        list_zip(tw_pad_shape(tw_bc.a, greatest(len(tw_bc.a), len(tw_bc.b))), tw_pad_shape(tw_bc.b, greatest(len(tw_bc.a), len(tw_bc.b)))),
        lambda p: CASE WHEN p[1] = 1 THEN p[2] ELSE p[1] END
    )
END)[1];

CREATE OR REPLACE MACRO tw_contiguous(shape, strides) AS list_transform([{'s': shape, 't': strides}], lambda tw_ct: CASE
    WHEN tw_ct.s IS NULL OR tw_ct.t IS NULL OR len(tw_ct.s) <> len(tw_ct.t) THEN NULL
    WHEN len(tw_ct.s) = 0 THEN true
    ELSE list_bool_and(list_transform(
        range(1, len(tw_ct.s) + 1),
        lambda i: tw_ct.s[i] <= 1 OR tw_ct.t[i] = 0 OR tw_ct.t[i] = tw_numel(list_transform(
            list_filter(list_zip(tw_ct.s[i + 1:], tw_ct.t[i + 1:]), lambda p: p[2] <> 0),
            lambda p: p[1]))
    ))
END)[1];

CREATE OR REPLACE MACRO tw_swap_last2(x) AS list_transform([x], lambda tw_sw: CASE
    WHEN tw_sw IS NULL OR len(tw_sw) < 2 THEN tw_sw
    ELSE list_concat(tw_sw[1:len(tw_sw) - 2], [tw_sw[len(tw_sw)], tw_sw[len(tw_sw) - 1]])
END)[1];

CREATE OR REPLACE MACRO tw_gemm_layout_ok(shape, strides) AS list_transform([{'s': shape, 't': strides}], lambda tw_gl:
    tw_contiguous(tw_gl.s, tw_gl.t) OR tw_contiguous(tw_swap_last2(tw_gl.s), tw_swap_last2(tw_gl.t)))[1];
