-- 75_perfmodel.sql: the performance model: FLOPs and bytes moved per call of a CPU operator,
-- computed from what the trace recorded about its arguments ("Input Dims", "Input type",
-- "Input Strides", "Concrete Inputs" of `events.args_json`; recorded with record_shapes=True).
--
-- cpu_op_args(run_list)  (table macro)
--   grain: one row per cpu_op event of the runs in `run_list` (VARCHAR[]).
--   columns: run_id, event_index, pid, tid, name, ts_ns, dur_ns, input_dims, input_types,
--            input_strides, concrete_inputs (the JSON text of each arg list of args_json,
--            parsed once per event; NULL when not recorded)
--
-- op_signatures(run_list)  (table macro)
--   grain: one row per distinct (run_id, name, Input Dims, Input type, Input Strides, Concrete
--          Inputs) among the cpu_op events of the runs in `run_list` (VARCHAR[]).
--   columns: run_id, op_name, input_dims, input_types, input_strides, concrete_inputs (the
--            JSON text of each arg list; NULL when not recorded), ops (events with it)
--
-- op_work(run_list)  (table macro)
--   grain: one row per row of op_signatures(run_list).
--   columns: run_id, op_name, input_dims, input_types, input_strides, concrete_inputs, family,
--            dtype, params, flops (per call, DOUBLE), bytes (per call, DOUBLE), roof,
--            non_contiguous, note
--   family: gemm | grouped_gemm | attention | attention_bwd | conv | conv_bwd | norm |
--           norm_bwd | softmax | pointwise | reduction | copy | embedding; NULL: no perf model.
--   flops/bytes: NULL when the op has no model or its arguments do not determine the work
--           (the reason is in `note`); never estimated. bytes = every input read once plus
--           every output written once (an ideal-cache lower bound on memory traffic).
--   dtype: the dtype label of the op's first tensor input (q for attention, the source of a
--          copy). params: the model's parameters in words (M=.. N=.. K=.., B=.. H=.. S_q=..).
--   roof: the device peak a row is compared with: a tw_roof_dtype label (or tf32 for fp32
--         convolutions with allow_tf32) for gemm, grouped_gemm, attention and conv families
--         (matrix units); 'vector' (the FP32 vector peak) for every other family.
--   non_contiguous: a tensor input is not row-major dense (tw_contiguous); GEMM operands may
--         be transposed views (tw_gemm_layout_ok); attention inputs only need a unit-stride
--         head dim (the kernels take [B, S, H, D] and [B, H, S, D] views); NULL when no
--         strides were recorded.
--   Formulas (E = tw_numel of the main input, bpe = tw_dtype_bytes; see the README, "Roofline"):
--   gemm: A [.., M, K] x B [.., K, N], batch = numel of the broadcast leading dims;
--         flops = 2*batch*M*N*K (+ batch*M*N with a bias); bytes = A + B (+ bias) + out.
--         mm, addmm, bmm, baddbmm, matmul, linear (B = weight^T), _scaled_mm (+ scales).
--   grouped_gemm: _grouped_mm / _scaled_grouped_mm: [M, K] x [G, K, N] -> flops 2*M*K*N;
--         [G, M, K] x [G, K, N] -> 2*G*M*N*K; [M, K] x [K, N] with offs of G groups ->
--         2*M*N*K (out [G, M, N]).
--   attention: flops = 2*B*H_q*S_q*S_kv*(D_qk + D_v) x the unmasked fraction (1, or for
--         causal masks the area left of the diagonal: 1/2 for S_q = S_kv, aligned top-left for
--         aten SDPA and bottom-right for flash-attn/aiter and mask type 2); bytes = Q + K + V +
--         O. attention_bwd: 2.5 x the forward flops (5 matmuls: QK^T recomputed, dV, dP, dQ,
--         dK); bytes = Q, K, V, O, dO read + dQ, dK, dV written. Variable-length batches,
--         sliding windows and unknown is_causal: no FLOPs.
--   conv: flops = 2*numel(out)*C_in/groups*prod(kernel) (+ numel(out) with a bias; transposed:
--         numel(input) instead of numel(out)); bytes = input + weight (+ bias) + out.
--         conv_bwd: the forward count per gradient asked for (input, weight), + numel(out) for
--         the bias gradient.
--   norm (C: normalized_shape from Concrete Inputs, else the weight's size):
--         layer/group/batch norm (training) flops = E*(6 + [weight] + [bias]); batch norm in
--         inference 2*E; RMS norm E*(3 + [weight]); bytes = input + output + weight/bias (+
--         the fp32 mean/rstd the op writes).
--   norm_bwd (native_layer_norm_backward; C = the weight's size, else E / numel(mean)):
--         flops = E*(9 + [weight]) for dx (x_hat 2, g*w 1, the two row sums 3, dx 4), + 2*E
--         for dweight, + E for dbias (the gradients output_mask asks for; all when not
--         recorded); bytes = grad_out + input + mean/rstd + weight read, dx, dweight, dbias
--         written.
--   softmax: flops = 5*E (max, sub, exp, sum, div); backward 4*E (log_softmax 3*E).
--   pointwise: flops = numel(out) (2 for addcmul, addcdiv, lerp; 0 for fill_, zero_);
--         out = the broadcast of the tensor inputs (self for in-place ops); bytes = every
--         tensor input read once + out written once. In-place ops (name ending in _) read and
--         write self. An out= call (one argument more than the functional schema, the last a
--         tensor) writes its out tensor and does not read it (params: out-variant).
--   reduction: flops = E (norm 2*E; var, std, logsumexp 3*E); out from dim/keepdim.
--   copy: copy_, clone, contiguous, _to_copy, index_select, gather: flops 0, bytes read +
--         written; embedding: flops 0, bytes = indices + 2 * gathered rows.

CREATE OR REPLACE MACRO cpu_op_args(run_list) AS TABLE
SELECT
    run_id, event_index, pid, tid, name, ts_ns, dur_ns,
    CAST(a[1] AS VARCHAR) AS input_dims,
    CAST(a[2] AS VARCHAR) AS input_types,
    CAST(a[3] AS VARCHAR) AS input_strides,
    CAST(a[4] AS VARCHAR) AS concrete_inputs
FROM (
    SELECT *, json_extract(args_json, ['$."Input Dims"', '$."Input type"', '$."Input Strides"',
                                       '$."Concrete Inputs"']) AS a
    FROM events
    WHERE list_contains(CAST(run_list AS VARCHAR[]), run_id) AND cat = 'cpu_op'
);

CREATE OR REPLACE MACRO op_signatures(run_list) AS TABLE
SELECT
    run_id,
    name AS op_name,
    input_dims,
    input_types,
    input_strides,
    concrete_inputs,
    count(*) AS ops
FROM cpu_op_args(run_list)
GROUP BY ALL;

CREATE OR REPLACE MACRO op_work(run_list) AS TABLE
WITH sig0 AS (
    SELECT
        *,
        row_number() OVER () AS sig_id,
        list_transform(CAST(CAST(input_dims AS JSON) AS JSON[]), lambda x: tw_shape(x)) AS sh,
        list_transform(CAST(CAST(input_strides AS JSON) AS JSON[]), lambda x: tw_shape(x)) AS sd,
        list_transform(CAST(CAST(input_types AS JSON) AS VARCHAR[]), lambda x: tw_dtype(x)) AS dt,
        CAST(CAST(input_types AS JSON) AS VARCHAR[]) AS ty,
        coalesce(CAST(CAST(concrete_inputs AS JSON) AS VARCHAR[]), CAST([] AS VARCHAR[])) AS ci,
        regexp_replace(op_name, '_$', '') AS base
    FROM op_signatures(run_list)
),
sig AS MATERIALIZED (
    SELECT
        *,
        list_transform(sh, lambda s: tw_numel(s)) AS ne,
        list_transform(range(1, len(sh) + 1), lambda i: tw_contiguous(sh[i], sd[i])) AS cont
    FROM sig0
),
-- ---------------------------------------------------------------- GEMM family
gemm_ix AS (
    SELECT *, CASE op_name
        WHEN 'aten::mm' THEN [1, 2, 0]
        WHEN 'aten::bmm' THEN [1, 2, 0]
        WHEN 'aten::matmul' THEN [1, 2, 0]
        WHEN 'aten::addmm' THEN [2, 3, 1]
        WHEN 'aten::baddbmm' THEN [2, 3, 1]
        WHEN 'aten::linear' THEN [1, 2, 3]
        WHEN 'aten::_scaled_mm' THEN [1, 2, 5]
    END AS ix
    FROM sig
    WHERE op_name IN ('aten::mm', 'aten::bmm', 'aten::matmul', 'aten::addmm', 'aten::baddbmm',
                      'aten::linear', 'aten::_scaled_mm')
),
gemm_ops AS (
    SELECT
        *,
        sh[ix[1]] AS sa, sh[ix[2]] AS sb, dt[ix[1]] AS dta, dt[ix[2]] AS dtb,
        CASE WHEN ix[3] > 0 AND dt[ix[3]] IS NOT NULL THEN sh[ix[3]] END AS sbias,
        CASE WHEN ix[3] > 0 THEN dt[ix[3]] END AS dtbias,
        CASE WHEN op_name = 'aten::_scaled_mm' THEN tw_scalar_type(ci[7]) END AS dtout_arg
    FROM gemm_ix
),
gemm_mnk AS (
    SELECT
        *,
        CASE WHEN op_name = 'aten::linear' THEN sa[len(sa)] ELSE sa[len(sa)] END AS k,
        CASE WHEN op_name = 'aten::linear' THEN sb[2]
             WHEN len(sb) >= 2 THEN sb[len(sb) - 1] ELSE sb[1] END AS kb,
        CASE WHEN op_name = 'aten::linear' THEN tw_numel(sa[1:len(sa) - 1])
             WHEN len(sa) >= 2 THEN sa[len(sa) - 1] ELSE 1 END AS m,
        CASE WHEN op_name = 'aten::linear' THEN sb[1]
             WHEN len(sb) >= 2 THEN sb[len(sb)] ELSE 1 END AS n,
        CASE WHEN op_name = 'aten::linear' THEN 1
             ELSE tw_numel(tw_broadcast(
                 CASE WHEN len(sa) > 2 THEN sa[1:len(sa) - 2] ELSE CAST([] AS BIGINT[]) END,
                 CASE WHEN len(sb) > 2 THEN sb[1:len(sb) - 2] ELSE CAST([] AS BIGINT[]) END))
        END AS batch,
        coalesce(dtout_arg, dta) AS dtout
    FROM gemm_ops
),
gemm AS (
    SELECT
        * EXCLUDE (ix, sa, sb, dta, dtb, sbias, dtbias, dtout_arg, k, kb, m, n, batch, dtout),
        'gemm' AS family,
        dta AS dtype,
        concat_ws(' ', CASE WHEN batch > 1 THEN 'B=' || batch END, 'M=' || m, 'N=' || n,
                  'K=' || k, CASE WHEN sbias IS NOT NULL THEN '+bias' END,
                  CASE WHEN dtout <> dta THEN 'out=' || dtout END) AS params,
        CASE WHEN ok THEN 2.0 * batch * m * n * k + CASE WHEN sbias IS NOT NULL THEN 1.0 * batch * m * n ELSE 0 END END AS flops,
        CASE WHEN ok THEN 1.0 * tw_numel(sa) * tw_dtype_bytes(dta) + 1.0 * tw_numel(sb) * tw_dtype_bytes(dtb)
             + 1.0 * batch * m * n * tw_dtype_bytes(dtout)
             + coalesce(1.0 * tw_numel(sbias) * tw_dtype_bytes(dtbias), 0)
             + CASE WHEN op_name = 'aten::_scaled_mm'
                    THEN coalesce(1.0 * ne[3] * tw_dtype_bytes(dt[3]), 0)
                       + coalesce(1.0 * ne[4] * tw_dtype_bytes(dt[4]), 0)
                    ELSE 0 END
        END AS bytes,
        tw_roof_dtype(dta) AS roof,
        NOT (tw_gemm_layout_ok(sa, sd[ix[1]]) AND tw_gemm_layout_ok(sb, sd[ix[2]])) AS non_contiguous,
        CASE WHEN NOT ok THEN 'GEMM shapes not recognised' END AS reason
    FROM (SELECT *, coalesce(len(sa) >= 1 AND len(sb) >= 1 AND k = kb AND k > 0
                             AND tw_dtype_bytes(dta) IS NOT NULL AND tw_dtype_bytes(dtb) IS NOT NULL
                             AND batch IS NOT NULL, false) AS ok
          FROM gemm_mnk)
),
-- ---------------------------------------------------------------- grouped GEMM
grouped_ops AS (
    SELECT
        *,
        sh[1] AS sa, sh[2] AS sb, dt[1] AS dta, dt[2] AS dtb,
        CASE WHEN op_name = 'aten::_grouped_mm' THEN sh[3] ELSE sh[5] END AS soffs,
        coalesce(tw_scalar_type(CASE WHEN op_name = 'aten::_grouped_mm' THEN ci[5] ELSE ci[8] END),
                 CASE WHEN dt[1] LIKE 'fp8%' THEN 'bf16' ELSE dt[1] END) AS dtout
    FROM sig
    WHERE op_name IN ('aten::_grouped_mm', 'aten::_scaled_grouped_mm')
),
grouped_mnk AS (
    SELECT
        *,
        CASE WHEN len(sa) = 2 AND len(sb) = 3 THEN sb[1]
             WHEN len(sa) = 3 AND len(sb) = 3 THEN sa[1]
             WHEN len(sa) = 2 AND len(sb) = 2 THEN soffs[1] END AS g,
        CASE WHEN len(sa) IN (2, 3) AND len(sb) IN (2, 3) AND len(sa) <= len(sb) THEN sa[len(sa) - 1] END AS m,
        sa[len(sa)] AS k,
        sb[len(sb) - 1] AS kb,
        sb[len(sb)] AS n
    FROM grouped_ops
),
grouped AS (
    SELECT
        * EXCLUDE (sa, sb, dta, dtb, soffs, dtout, g, m, k, kb, n),
        'grouped_gemm' AS family,
        dta AS dtype,
        concat_ws(' ', 'G=' || g, 'M=' || m, 'N=' || n, 'K=' || k) AS params,
        CASE WHEN ok THEN 2.0 * m * n * k * CASE WHEN len(sa) = 3 THEN g ELSE 1 END END AS flops,
        CASE WHEN ok THEN 1.0 * tw_numel(sa) * tw_dtype_bytes(dta) + 1.0 * tw_numel(sb) * tw_dtype_bytes(dtb)
             + 1.0 * m * n * CASE WHEN len(sa) = 2 AND len(sb) = 3 THEN 1 ELSE g END * tw_dtype_bytes(dtout)
        END AS bytes,
        tw_roof_dtype(dta) AS roof,
        NOT (tw_gemm_layout_ok(sa, sd[1]) AND tw_gemm_layout_ok(sb, sd[2])) AS non_contiguous,
        CASE WHEN NOT ok THEN 'grouped GEMM shapes not recognised (or no offs for a 2D x 2D call)' END AS reason
    FROM (SELECT *, coalesce(g > 0 AND m > 0 AND k = kb AND tw_dtype_bytes(dta) IS NOT NULL, false) AS ok
          FROM grouped_mnk)
),
-- ---------------------------------------------------------------- attention
-- q: 1-based arg index of the query; bshd: [B, S, H, D] layout (else [.., H, S, D]); ci: the
-- Concrete Input of is_causal (mask type for the efficient kernels); br: causal aligned
-- bottom-right; bwd: a backward op; vl: arg index of cu_seqlens (variable length when given);
-- wl: arg index of window_size_left (a sliding window when >= 0).
attn_spec AS (
    SELECT *, CASE op_name
        WHEN 'aten::scaled_dot_product_attention' THEN {'q': 1, 'bshd': false, 'ci': 6, 'mt': false, 'br': false, 'bwd': false, 'vl': 0, 'wl': 0}
        WHEN 'aten::_scaled_dot_product_flash_attention' THEN {'q': 1, 'bshd': false, 'ci': 5, 'mt': false, 'br': false, 'bwd': false, 'vl': 0, 'wl': 0}
        WHEN 'aten::_scaled_dot_product_efficient_attention' THEN {'q': 1, 'bshd': false, 'ci': 7, 'mt': false, 'br': false, 'bwd': false, 'vl': 0, 'wl': 0}
        WHEN 'aten::_scaled_dot_product_cudnn_attention' THEN {'q': 1, 'bshd': false, 'ci': 7, 'mt': false, 'br': false, 'bwd': false, 'vl': 0, 'wl': 0}
        WHEN 'aten::_flash_attention_forward' THEN {'q': 1, 'bshd': true, 'ci': 9, 'mt': false, 'br': false, 'bwd': false, 'vl': 4, 'wl': 12}
        WHEN 'aten::_efficient_attention_forward' THEN {'q': 1, 'bshd': true, 'ci': 10, 'mt': true, 'br': false, 'bwd': false, 'vl': 5, 'wl': 0}
        WHEN 'flash_attn::_flash_attn_forward' THEN {'q': 1, 'bshd': true, 'ci': 6, 'mt': false, 'br': true, 'bwd': false, 'vl': 0, 'wl': 7}
        WHEN 'aiter::_flash_attn_forward' THEN {'q': 1, 'bshd': true, 'ci': 6, 'mt': false, 'br': true, 'bwd': false, 'vl': 0, 'wl': 7}
        WHEN 'aiter::mha_fwd' THEN {'q': 1, 'bshd': true, 'ci': 6, 'mt': false, 'br': true, 'bwd': false, 'vl': 0, 'wl': 7}
        WHEN 'aiter::fmha_v3_fwd' THEN {'q': 1, 'bshd': true, 'ci': 6, 'mt': false, 'br': true, 'bwd': false, 'vl': 0, 'wl': 7}
        WHEN 'aten::_scaled_dot_product_flash_attention_backward' THEN {'q': 2, 'bshd': false, 'ci': 12, 'mt': false, 'br': false, 'bwd': true, 'vl': 0, 'wl': 0}
        WHEN 'aten::_scaled_dot_product_efficient_attention_backward' THEN {'q': 2, 'bshd': false, 'ci': 12, 'mt': false, 'br': false, 'bwd': true, 'vl': 0, 'wl': 0}
        WHEN 'aten::_scaled_dot_product_cudnn_attention_backward' THEN {'q': 2, 'bshd': false, 'ci': 15, 'mt': false, 'br': false, 'bwd': true, 'vl': 0, 'wl': 0}
        WHEN 'aten::_flash_attention_backward' THEN {'q': 2, 'bshd': true, 'ci': 12, 'mt': false, 'br': false, 'bwd': true, 'vl': 7, 'wl': 16}
        WHEN 'aten::_efficient_attention_backward' THEN {'q': 2, 'bshd': true, 'ci': 15, 'mt': true, 'br': false, 'bwd': true, 'vl': 7, 'wl': 0}
    END AS a
    FROM sig
    WHERE op_name IN (
        'aten::scaled_dot_product_attention', 'aten::_scaled_dot_product_flash_attention',
        'aten::_scaled_dot_product_efficient_attention', 'aten::_scaled_dot_product_cudnn_attention',
        'aten::_flash_attention_forward', 'aten::_efficient_attention_forward',
        'flash_attn::_flash_attn_forward', 'aiter::_flash_attn_forward', 'aiter::mha_fwd',
        'aiter::fmha_v3_fwd', 'aten::_scaled_dot_product_flash_attention_backward',
        'aten::_scaled_dot_product_efficient_attention_backward',
        'aten::_scaled_dot_product_cudnn_attention_backward', 'aten::_flash_attention_backward',
        'aten::_efficient_attention_backward')
),
attn_dims AS (
    SELECT
        *,
        sh[a.q] AS q, sh[a.q + 1] AS kk, sh[a.q + 2] AS v, dt[a.q] AS dtq,
        -- is_causal: true / false / NULL (not recorded); mask type 1 = top-left, 2 = bottom-right
        CASE WHEN a.mt THEN CASE ci[a.ci] WHEN '0' THEN false WHEN '1' THEN true WHEN '2' THEN true END
             ELSE CASE ci[a.ci] WHEN 'True' THEN true WHEN 'False' THEN false END END AS causal,
        CASE WHEN a.mt THEN ci[a.ci] = '2' ELSE a.br END AS bottom_right,
        a.vl > 0 AND dt[a.vl] IS NOT NULL AS varlen,
        a.wl > 0 AND coalesce(TRY_CAST(ci[a.wl] AS BIGINT) >= 0 OR TRY_CAST(ci[a.wl + 1] AS BIGINT) >= 0, false) AS windowed
    FROM attn_spec
),
attn_bhsd AS (
    SELECT
        *,
        -- batch x heads, sequence lengths, head dims
        CASE WHEN a.bshd THEN q[1] ELSE tw_numel(q[1:len(q) - 3]) END AS b,
        CASE WHEN a.bshd THEN q[3] WHEN len(q) >= 3 THEN q[len(q) - 2] ELSE 1 END AS hq,
        CASE WHEN a.bshd THEN kk[3] WHEN len(kk) >= 3 THEN kk[len(kk) - 2] ELSE 1 END AS hkv,
        CASE WHEN a.bshd THEN q[2] ELSE q[len(q) - 1] END AS sq,
        CASE WHEN a.bshd THEN kk[2] ELSE kk[len(kk) - 1] END AS skv,
        q[len(q)] AS dqk,
        v[len(v)] AS dv
    FROM attn_dims
),
attn_frac AS (
    SELECT
        *,
        CASE WHEN NOT causal THEN 1.0
             WHEN bottom_right THEN CASE WHEN sq <= skv THEN (1.0 * sq * (skv - sq) + 0.5 * sq * sq) / (1.0 * sq * skv)
                                         ELSE 0.5 * skv * skv / (1.0 * sq * skv) END
             ELSE CASE WHEN sq <= skv THEN 0.5 * sq * sq / (1.0 * sq * skv)
                       ELSE (0.5 * skv * skv + 1.0 * (sq - skv) * skv) / (1.0 * sq * skv) END
        END AS frac,
        coalesce(len(q) >= 3 AND len(kk) = len(q) AND len(v) = len(q) AND (a.bshd = false OR len(q) = 4)
                 AND sq > 0 AND skv > 0 AND dqk > 0 AND dv > 0 AND tw_dtype_bytes(dtq) IS NOT NULL, false) AS shapes_ok
    FROM attn_bhsd
),
attention AS (
    SELECT
        * EXCLUDE (a, q, kk, v, dtq, causal, bottom_right, varlen, windowed, b, hq, hkv, sq, skv, dqk, dv, frac, shapes_ok),
        CASE WHEN a.bwd THEN 'attention_bwd' ELSE 'attention' END AS family,
        dtq AS dtype,
        concat_ws(' ', 'B=' || CASE WHEN a.bshd OR len(q) < 4 THEN b ELSE q[1] END, 'H=' || hq,
                  CASE WHEN hkv <> hq THEN 'H_kv=' || hkv END, 'S_q=' || sq, 'S_kv=' || skv,
                  'D=' || dqk, CASE WHEN dv <> dqk THEN 'D_v=' || dv END,
                  CASE WHEN causal THEN CASE WHEN bottom_right THEN 'causal(bottom-right)' ELSE 'causal' END END) AS params,
        CASE WHEN ok THEN (CASE WHEN a.bwd THEN 2.5 ELSE 1.0 END) * frac * 2.0
                          * (CASE WHEN a.bshd THEN b * hq ELSE tw_numel(q[1:len(q) - 2]) END)
                          * sq * skv * (dqk + dv) END AS flops,
        CASE WHEN ok THEN (CASE WHEN a.bwd THEN 2.0 ELSE 1.0 END)
                          * (1.0 * tw_numel(q) + tw_numel(kk) + tw_numel(v)
                             + (CASE WHEN a.bshd THEN b * hq ELSE tw_numel(q[1:len(q) - 2]) END) * sq * dv)
                          * tw_dtype_bytes(dtq) END AS bytes,
        tw_roof_dtype(dtq) AS roof,
        sd[a.q][len(sd[a.q])] <> 1 OR sd[a.q + 1][len(sd[a.q + 1])] <> 1
            OR sd[a.q + 2][len(sd[a.q + 2])] <> 1 AS non_contiguous,
        CASE WHEN varlen THEN 'variable-length batch (cu_seqlens): the sequence lengths are not in the trace'
             WHEN NOT shapes_ok THEN 'attention shapes not recognised'
             WHEN windowed THEN 'sliding-window attention: not modelled'
             WHEN causal IS NULL THEN 'is_causal not recorded (no Concrete Inputs)'
        END AS reason
    FROM (SELECT *, shapes_ok AND NOT varlen AND NOT windowed AND causal IS NOT NULL AS ok FROM attn_frac)
),
-- ---------------------------------------------------------------- convolution
-- x, w, bias: arg indices (bias 0: none); s, p, d, op, g: Concrete Input indices of stride,
-- padding, dilation, output_padding (0: none) and groups; tr: transposed (or Concrete Input
-- index of `transposed` when tri > 0); tf: Concrete Input index of allow_tf32 (0: none);
-- go: grad_output arg (backward); mask: Concrete Input index of output_mask (backward).
conv_spec AS (
    SELECT *, CASE op_name
        WHEN 'aten::convolution' THEN {'x': 1, 'w': 2, 'bias': 3, 's': 4, 'p': 5, 'd': 6, 'op': 8, 'g': 9, 'tr': false, 'tri': 7, 'tf': 0, 'go': 0, 'mask': 0}
        WHEN 'aten::_convolution' THEN {'x': 1, 'w': 2, 'bias': 3, 's': 4, 'p': 5, 'd': 6, 'op': 8, 'g': 9, 'tr': false, 'tri': 7, 'tf': 13, 'go': 0, 'mask': 0}
        WHEN 'aten::conv1d' THEN {'x': 1, 'w': 2, 'bias': 3, 's': 4, 'p': 5, 'd': 6, 'op': 0, 'g': 7, 'tr': false, 'tri': 0, 'tf': 0, 'go': 0, 'mask': 0}
        WHEN 'aten::conv2d' THEN {'x': 1, 'w': 2, 'bias': 3, 's': 4, 'p': 5, 'd': 6, 'op': 0, 'g': 7, 'tr': false, 'tri': 0, 'tf': 0, 'go': 0, 'mask': 0}
        WHEN 'aten::conv3d' THEN {'x': 1, 'w': 2, 'bias': 3, 's': 4, 'p': 5, 'd': 6, 'op': 0, 'g': 7, 'tr': false, 'tri': 0, 'tf': 0, 'go': 0, 'mask': 0}
        WHEN 'aten::cudnn_convolution' THEN {'x': 1, 'w': 2, 'bias': 0, 's': 4, 'p': 3, 'd': 5, 'op': 0, 'g': 6, 'tr': false, 'tri': 0, 'tf': 9, 'go': 0, 'mask': 0}
        WHEN 'aten::cudnn_convolution_transpose' THEN {'x': 1, 'w': 2, 'bias': 0, 's': 5, 'p': 3, 'd': 6, 'op': 4, 'g': 7, 'tr': true, 'tri': 0, 'tf': 10, 'go': 0, 'mask': 0}
        WHEN 'aten::miopen_convolution' THEN {'x': 1, 'w': 2, 'bias': 3, 's': 5, 'p': 4, 'd': 6, 'op': 0, 'g': 7, 'tr': false, 'tri': 0, 'tf': 0, 'go': 0, 'mask': 0}
        WHEN 'aten::miopen_convolution_transpose' THEN {'x': 1, 'w': 2, 'bias': 3, 's': 6, 'p': 4, 'd': 7, 'op': 5, 'g': 8, 'tr': true, 'tri': 0, 'tf': 0, 'go': 0, 'mask': 0}
        WHEN 'aten::convolution_backward' THEN {'x': 2, 'w': 3, 'bias': 0, 's': 5, 'p': 6, 'd': 7, 'op': 9, 'g': 10, 'tr': false, 'tri': 8, 'tf': 0, 'go': 1, 'mask': 11}
    END AS cs
    FROM sig
    WHERE op_name IN ('aten::convolution', 'aten::_convolution', 'aten::conv1d', 'aten::conv2d',
                      'aten::conv3d', 'aten::cudnn_convolution', 'aten::cudnn_convolution_transpose',
                      'aten::miopen_convolution', 'aten::miopen_convolution_transpose',
                      'aten::convolution_backward')
),
conv_args AS (
    SELECT
        *,
        sh[cs.x] AS x, sh[cs.w] AS w, dt[cs.x] AS dtx, dt[cs.w] AS dtw,
        CASE WHEN cs.bias > 0 AND dt[cs.bias] IS NOT NULL THEN true ELSE false END AS has_bias,
        len(sh[cs.x]) - 2 AS nd,
        tw_int_list(ci[cs.s]) AS s0, tw_int_list(ci[cs.p]) AS p0, tw_int_list(ci[cs.d]) AS d0,
        CASE WHEN cs.op > 0 THEN tw_int_list(ci[cs.op]) ELSE [0] END AS op0,
        TRY_CAST(ci[cs.g] AS BIGINT) AS groups,
        CASE WHEN cs.tri > 0 THEN ci[cs.tri] = 'True' ELSE cs.tr END AS transposed,
        cs.tf > 0 AND ci[cs.tf] = 'True' AS tf32,
        CASE WHEN cs.mask > 0 THEN TRY_CAST(ci[cs.mask] AS BOOLEAN[]) END AS mask
    FROM conv_spec
),
conv_out AS (
    SELECT
        *,
        list_transform(range(1, nd + 1), lambda i: CASE
            WHEN transposed THEN (x[i + 2] - 1) * s0[CASE WHEN len(s0) = 1 THEN 1 ELSE i END]
                 - 2 * p0[CASE WHEN len(p0) = 1 THEN 1 ELSE i END]
                 + d0[CASE WHEN len(d0) = 1 THEN 1 ELSE i END] * (w[i + 2] - 1)
                 + op0[CASE WHEN len(op0) = 1 THEN 1 ELSE i END] + 1
            ELSE CAST(floor((x[i + 2] + 2 * p0[CASE WHEN len(p0) = 1 THEN 1 ELSE i END]
                 - d0[CASE WHEN len(d0) = 1 THEN 1 ELSE i END] * (w[i + 2] - 1) - 1)
                 / s0[CASE WHEN len(s0) = 1 THEN 1 ELSE i END]) + 1 AS BIGINT)
        END) AS out_sp,
        CASE WHEN transposed THEN w[2] * groups ELSE w[1] END AS c_out
    FROM conv_args
),
conv_num AS (
    SELECT
        *,
        x[1] * c_out * tw_numel(out_sp) AS out_numel,
        2.0 * (CASE WHEN transposed THEN tw_numel(x) ELSE x[1] * c_out * tw_numel(out_sp) END)
            * tw_numel(w[2:]) AS mac_flops,
        coalesce(nd >= 1 AND len(w) = nd + 2 AND groups > 0 AND s0 IS NOT NULL AND p0 IS NOT NULL
                 AND d0 IS NOT NULL AND list_bool_and(list_transform(out_sp, lambda o: o > 0))
                 AND tw_dtype_bytes(dtx) IS NOT NULL AND (cs.mask = 0 OR len(mask) = 3), false) AS ok
    FROM conv_out
),
conv AS (
    SELECT
        * EXCLUDE (cs, x, w, dtx, dtw, has_bias, nd, s0, p0, d0, op0, groups, transposed, tf32, mask, out_sp, c_out, out_numel, mac_flops, ok),
        CASE WHEN cs.go > 0 THEN 'conv_bwd' ELSE 'conv' END AS family,
        dtx AS dtype,
        concat_ws(' ', 'N=' || x[1], 'C=' || x[2] || '->' || c_out,
                  'in=' || array_to_string(x[3:], 'x'), 'k=' || array_to_string(w[3:], 'x'),
                  's=' || array_to_string(s0, 'x'), 'p=' || array_to_string(p0, 'x'),
                  CASE WHEN list_bool_or(list_transform(d0, lambda v: v <> 1)) THEN 'd=' || array_to_string(d0, 'x') END,
                  'out=' || array_to_string(out_sp, 'x'),
                  CASE WHEN groups <> 1 THEN 'g=' || groups END,
                  CASE WHEN transposed THEN 'transposed' END,
                  CASE WHEN has_bias THEN '+bias' END,
                  CASE WHEN cs.go > 0 THEN 'grads=' || array_to_string(mask, ',') END) AS params,
        CASE WHEN NOT ok THEN NULL
             WHEN cs.go > 0 THEN mac_flops * ((CASE WHEN mask[1] THEN 1 ELSE 0 END) + (CASE WHEN mask[2] THEN 1 ELSE 0 END))
                                 + CASE WHEN mask[3] THEN 1.0 * out_numel ELSE 0 END
             ELSE mac_flops + CASE WHEN has_bias THEN 1.0 * out_numel ELSE 0 END
        END AS flops,
        CASE WHEN NOT ok THEN NULL
             WHEN cs.go > 0 THEN tw_dtype_bytes(dtx) * (1.0 * out_numel
                  + CASE WHEN mask[1] THEN 1.0 * tw_numel(w) + tw_numel(x) ELSE 0 END
                  + CASE WHEN mask[2] THEN 1.0 * tw_numel(x) + tw_numel(w) ELSE 0 END
                  + CASE WHEN mask[3] THEN 1.0 * c_out ELSE 0 END)
             ELSE tw_dtype_bytes(dtx) * (1.0 * tw_numel(x) + out_numel + CASE WHEN has_bias THEN c_out ELSE 0 END)
                  + 1.0 * tw_numel(w) * tw_dtype_bytes(dtw)
        END AS bytes,
        CASE WHEN dtx = 'fp32' AND tf32 THEN 'tf32' ELSE tw_roof_dtype(dtx) END AS roof,
        NOT (cont[cs.x] AND cont[cs.w]) AS non_contiguous,
        CASE WHEN NOT ok THEN 'convolution arguments not recognised (stride/padding/groups, e.g. padding=''same'')' END AS reason
    FROM conv_num
),
-- ---------------------------------------------------------------- normalisation
norm_spec AS (
    SELECT *, CASE
        WHEN op_name IN ('aten::native_layer_norm', 'aten::layer_norm') THEN {'kind': 'layer', 'wi': 3, 'bi': 4, 'shape_ci': 2, 'g_ci': 0, 'train_ci': 0}
        WHEN op_name IN ('aten::rms_norm', 'aten::_fused_rms_norm') THEN {'kind': 'rms', 'wi': 3, 'bi': 0, 'shape_ci': 2, 'g_ci': 0, 'train_ci': 0}
        WHEN op_name = 'aten::native_group_norm' THEN {'kind': 'group', 'wi': 2, 'bi': 3, 'shape_ci': 0, 'g_ci': 7, 'train_ci': 0}
        WHEN op_name = 'aten::group_norm' THEN {'kind': 'group', 'wi': 3, 'bi': 4, 'shape_ci': 0, 'g_ci': 2, 'train_ci': 0}
        WHEN op_name IN ('aten::native_batch_norm', 'aten::cudnn_batch_norm', 'aten::miopen_batch_norm',
                         'aten::batch_norm', 'aten::_native_batch_norm_legit')
            THEN {'kind': 'batch', 'wi': 2, 'bi': 3, 'shape_ci': 0, 'g_ci': 0, 'train_ci': 6}
    END AS ns
    FROM sig
    WHERE op_name IN ('aten::native_layer_norm', 'aten::layer_norm', 'aten::rms_norm', 'aten::_fused_rms_norm',
                      'aten::native_group_norm', 'aten::group_norm', 'aten::native_batch_norm',
                      'aten::cudnn_batch_norm', 'aten::miopen_batch_norm', 'aten::batch_norm',
                      'aten::_native_batch_norm_legit')
),
norm_args AS (
    SELECT
        *,
        sh[1] AS x, dt[1] AS dtx, ne[1] AS e,
        CASE WHEN dt[ns.wi] IS NOT NULL THEN 1 ELSE 0 END AS has_w,
        CASE WHEN ns.bi > 0 AND dt[ns.bi] IS NOT NULL THEN 1 ELSE 0 END AS has_b,
        -- normalized_shape from Concrete Inputs, else the weight's shape
        CASE WHEN ns.kind IN ('layer', 'rms')
             THEN coalesce(tw_numel(tw_int_list(ci[ns.shape_ci])), CASE WHEN dt[ns.wi] IS NOT NULL THEN ne[ns.wi] END)
             ELSE sh[1][2] END AS c,
        CASE WHEN ns.kind = 'group' THEN TRY_CAST(ci[ns.g_ci] AS BIGINT) END AS groups,
        CASE WHEN ns.kind = 'batch' THEN coalesce(ci[ns.train_ci] = 'True', op_name = 'aten::_native_batch_norm_legit') END AS training
    FROM norm_spec
),
norm AS (
    SELECT
        * EXCLUDE (ns, x, dtx, e, has_w, has_b, c, groups, training),
        'norm' AS family,
        dtx AS dtype,
        concat_ws(' ', ns.kind || '_norm', 'rows=' || (e // nullif(c, 0)), 'C=' || c,
                  CASE WHEN ns.kind = 'group' THEN 'G=' || groups END,
                  CASE WHEN ns.kind = 'batch' THEN CASE WHEN training THEN 'training' ELSE 'inference' END END,
                  CASE WHEN has_w = 1 THEN '+weight' END, CASE WHEN has_b = 1 THEN '+bias' END) AS params,
        CASE WHEN NOT ok THEN NULL
             WHEN ns.kind = 'rms' THEN 1.0 * e * (3 + has_w)
             WHEN ns.kind = 'batch' AND NOT training THEN 2.0 * e
             ELSE 1.0 * e * (6 + has_w + has_b)
        END AS flops,
        CASE WHEN NOT ok THEN NULL
             ELSE 2.0 * e * tw_dtype_bytes(dtx) + 1.0 * c * (has_w + has_b) * tw_dtype_bytes(dtx)
                  + CASE ns.kind
                        WHEN 'layer' THEN 2.0 * 4 * (e // c)
                        WHEN 'rms' THEN CASE WHEN op_name = 'aten::_fused_rms_norm' THEN 4.0 * (e // c) ELSE 0 END
                        WHEN 'group' THEN 2.0 * 4 * x[1] * groups
                        ELSE CASE WHEN training THEN 4.0 * c * tw_dtype_bytes(dtx) + 2.0 * 4 * c
                                  ELSE 2.0 * c * tw_dtype_bytes(dtx) END
                    END
        END AS bytes,
        'vector' AS roof,
        NOT cont[1] AS non_contiguous,
        CASE WHEN NOT ok THEN 'normalisation arguments not recognised' END AS reason
    FROM (SELECT *, coalesce(e > 0 AND c > 0 AND e % c = 0 AND tw_dtype_bytes(dtx) IS NOT NULL
                             AND (ns.kind <> 'group' OR groups > 0), false) AS ok
          FROM norm_args)
),
-- layer norm backward: grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
-- output_mask (Concrete Inputs; all three gradients when not recorded). C = the weight's size,
-- else numel(input) / numel(mean) (one mean per row).
norm_bwd AS (
    SELECT
        * EXCLUDE (e, rows, c, has_w, has_b, mask, ok),
        'norm_bwd' AS family,
        dt[2] AS dtype,
        concat_ws(' ', 'layer_norm_backward', 'rows=' || rows, 'C=' || c,
                  CASE WHEN mask[1] THEN 'dx' END, CASE WHEN mask[2] AND has_w = 1 THEN 'dweight' END,
                  CASE WHEN mask[3] AND has_b = 1 THEN 'dbias' END) AS params,
        CASE WHEN ok THEN
            CASE WHEN mask[1] THEN 1.0 * e * (9 + has_w) ELSE 0 END
            + CASE WHEN mask[2] AND has_w = 1 THEN 2.0 * e ELSE 0 END
            + CASE WHEN mask[3] AND has_b = 1 THEN 1.0 * e ELSE 0 END
        END AS flops,
        CASE WHEN ok THEN
            2.0 * e * tw_dtype_bytes(dt[2]) + 2.0 * rows * coalesce(tw_dtype_bytes(dt[4]), 4)
            + CASE WHEN has_w = 1 THEN 1.0 * c * tw_dtype_bytes(dt[6]) ELSE 0 END
            + CASE WHEN mask[1] THEN 1.0 * e * tw_dtype_bytes(dt[2]) ELSE 0 END
            + CASE WHEN mask[2] AND has_w = 1 THEN 1.0 * c * tw_dtype_bytes(dt[6]) ELSE 0 END
            + CASE WHEN mask[3] AND has_b = 1 THEN 1.0 * c * tw_dtype_bytes(dt[7]) ELSE 0 END
        END AS bytes,
        'vector' AS roof,
        NOT (cont[1] AND cont[2]) AS non_contiguous,
        CASE WHEN NOT ok THEN 'layer norm backward arguments not recognised' END AS reason
    FROM (
        SELECT *, coalesce(e > 0 AND rows > 0 AND c > 0 AND rows * c = e AND tw_dtype_bytes(dt[2]) IS NOT NULL
                           AND tw_dtype_bytes(dt[1]) IS NOT NULL, false) AS ok
        FROM (
            SELECT *, ne[2] AS e,
                   CASE WHEN dt[4] IS NOT NULL THEN ne[4] END AS rows,
                   coalesce(CASE WHEN dt[6] IS NOT NULL THEN ne[6] END,
                            ne[2] // nullif(CASE WHEN dt[4] IS NOT NULL THEN ne[4] END, 0)) AS c,
                   CASE WHEN dt[6] IS NOT NULL THEN 1 ELSE 0 END AS has_w,
                   CASE WHEN dt[7] IS NOT NULL THEN 1 ELSE 0 END AS has_b,
                   coalesce(TRY_CAST(ci[8] AS BOOLEAN[]), [true, true, true]) AS mask
            FROM sig WHERE op_name = 'aten::native_layer_norm_backward'
        )
    )
),
-- ---------------------------------------------------------------- softmax
softmax AS (
    SELECT
        * EXCLUDE (dtx, dtout, e, per_elem),
        'softmax' AS family,
        dtx AS dtype,
        concat_ws(' ', 'elements=' || e, 'dim=' || ci[2], CASE WHEN dtout <> dtx THEN 'out=' || dtout END) AS params,
        CASE WHEN ok THEN 1.0 * per_elem * e END AS flops,
        CASE WHEN ok THEN 1.0 * e * (tw_dtype_bytes(dtx) * CASE WHEN op_name LIKE '%backward%' THEN 2 ELSE 1 END
                                     + tw_dtype_bytes(dtout)) END AS bytes,
        'vector' AS roof,
        NOT (cont[1] AND coalesce(cont[2], true)) AS non_contiguous,
        CASE WHEN NOT ok THEN 'softmax arguments not recognised' END AS reason
    FROM (
        SELECT
            *,
            dt[1] AS dtx,
            ne[1] AS e,
            CASE op_name
                WHEN 'aten::_softmax_backward_data' THEN 4
                WHEN 'aten::_log_softmax_backward_data' THEN 3
                ELSE 5 END AS per_elem,
            coalesce(CASE
                WHEN op_name IN ('aten::_softmax', 'aten::_log_softmax') AND ci[3] = 'True' THEN 'fp32'
                WHEN op_name IN ('aten::softmax', 'aten::log_softmax') THEN tw_scalar_type(ci[3])
                WHEN op_name LIKE '%backward_data' THEN tw_scalar_type(ci[4])
            END, dt[1]) AS dtout,
            coalesce(ne[1] > 0 AND tw_dtype_bytes(dt[1]) IS NOT NULL, false) AS ok
        FROM sig
        WHERE op_name IN ('aten::_softmax', 'aten::softmax', 'aten::_log_softmax', 'aten::log_softmax',
                          'aten::_softmax_backward_data', 'aten::_log_softmax_backward_data')
    )
),
-- ---------------------------------------------------------------- pointwise
pw_arity AS (
    SELECT
        *,
        -- arguments of the functional schema; an out= call records one more, a tensor, last
        CASE WHEN base IN ('aten::add', 'aten::sub', 'aten::rsub', 'aten::where', 'aten::masked_fill',
                           'aten::lerp', 'aten::clamp', 'aten::hardtanh', 'aten::threshold',
                           'aten::softplus', 'aten::gelu_backward', 'aten::threshold_backward',
                           'aten::native_dropout_backward') THEN 3
             WHEN base IN ('aten::addcmul', 'aten::addcdiv', 'aten::elu', 'aten::nan_to_num',
                           'aten::hardtanh_backward', 'aten::leaky_relu_backward',
                           'aten::softplus_backward') THEN 4
             WHEN base IN ('aten::mul', 'aten::maximum', 'aten::minimum', 'aten::fmod',
                           'aten::remainder', 'aten::atan2', 'aten::eq', 'aten::ne', 'aten::lt',
                           'aten::le', 'aten::gt', 'aten::ge', 'aten::logical_and', 'aten::logical_or',
                           'aten::logical_xor', 'aten::bitwise_and', 'aten::bitwise_or',
                           'aten::bitwise_xor', 'aten::pow', 'aten::gelu', 'aten::leaky_relu',
                           'aten::clamp_min', 'aten::clamp_max', 'aten::fill', 'aten::silu_backward',
                           'aten::sigmoid_backward', 'aten::tanh_backward', 'aten::mish_backward',
                           'aten::hardswish_backward', 'aten::hardsigmoid_backward') THEN 2
             WHEN base = 'aten::div' THEN CASE WHEN len(dt) >= 3 AND dt[3] IS NULL THEN 3 ELSE 2 END
             WHEN base = 'aten::elu_backward' THEN 6
             WHEN base IN ('aten::abs', 'aten::neg', 'aten::exp', 'aten::exp2', 'aten::expm1', 'aten::log',
                           'aten::log2', 'aten::log10', 'aten::log1p', 'aten::sqrt', 'aten::rsqrt',
                           'aten::reciprocal', 'aten::sigmoid', 'aten::tanh', 'aten::relu',
                           'aten::silu', 'aten::mish', 'aten::hardswish', 'aten::hardsigmoid',
                           'aten::sin', 'aten::cos', 'aten::erf', 'aten::erfinv', 'aten::sign',
                           'aten::floor', 'aten::ceil', 'aten::trunc', 'aten::square',
                           'aten::logical_not', 'aten::bitwise_not', 'aten::isnan', 'aten::isinf',
                           'aten::isfinite', 'aten::zero') THEN 1
        END AS arity
    FROM sig
),
pw_args AS (
    SELECT
        *,
        -- out= variant: not in-place, one argument more than the functional schema, the last
        -- one a tensor (the out tensor: written, never read)
        coalesce(op_name NOT LIKE '%\_' ESCAPE '\' AND len(dt) = arity + 1
                 AND sh[len(dt)] IS NOT NULL AND tw_dtype_bytes(dt[len(dt)]) IS NOT NULL, false) AS out_arg,
        -- tensor inputs: typed args with a recorded shape (the out tensor of an out= call apart)
        list_filter(list_transform(range(1, len(dt) + 1),
                                   lambda i: {'shape': sh[i], 'dtype': dt[i], 'cont': cont[i], 'numel': ne[i], 'i': i}),
                    lambda a: a.dtype IS NOT NULL AND a.shape IS NOT NULL
                              AND NOT coalesce(a.i = len(dt) AND len(dt) = arity + 1
                                               AND op_name NOT LIKE '%\_' ESCAPE '\', false)) AS tens,
        op_name IN ('aten::eq', 'aten::ne', 'aten::lt', 'aten::le', 'aten::gt', 'aten::ge',
                    'aten::logical_and', 'aten::logical_or', 'aten::logical_xor', 'aten::logical_not',
                    'aten::isnan', 'aten::isinf', 'aten::isfinite') AS cmp,
        op_name LIKE '%\_' ESCAPE '\' AND op_name NOT IN ('aten::copy_') AS inplace,
        CASE WHEN base IN ('aten::addcmul', 'aten::addcdiv', 'aten::lerp') THEN 2
             WHEN base IN ('aten::fill', 'aten::zero') THEN 0 ELSE 1 END AS per_elem
    FROM pw_arity
    WHERE base IN (
        'aten::abs', 'aten::neg', 'aten::exp', 'aten::exp2', 'aten::expm1', 'aten::log', 'aten::log2',
        'aten::log10', 'aten::log1p', 'aten::sqrt', 'aten::rsqrt', 'aten::reciprocal', 'aten::sigmoid',
        'aten::tanh', 'aten::relu', 'aten::gelu', 'aten::silu', 'aten::mish', 'aten::hardswish',
        'aten::hardsigmoid', 'aten::hardtanh', 'aten::leaky_relu', 'aten::elu', 'aten::softplus',
        'aten::sin', 'aten::cos', 'aten::erf', 'aten::erfinv', 'aten::sign', 'aten::floor', 'aten::ceil',
        'aten::round', 'aten::trunc', 'aten::clamp', 'aten::clamp_min', 'aten::clamp_max', 'aten::square',
        'aten::pow', 'aten::logical_not', 'aten::bitwise_not', 'aten::nan_to_num', 'aten::threshold',
        'aten::isnan', 'aten::isinf', 'aten::isfinite', 'aten::fill', 'aten::zero',
        'aten::add', 'aten::sub', 'aten::rsub', 'aten::mul', 'aten::div', 'aten::maximum', 'aten::minimum',
        'aten::fmod', 'aten::remainder', 'aten::atan2', 'aten::eq', 'aten::ne', 'aten::lt', 'aten::le',
        'aten::gt', 'aten::ge', 'aten::logical_and', 'aten::logical_or', 'aten::logical_xor',
        'aten::bitwise_and', 'aten::bitwise_or', 'aten::bitwise_xor', 'aten::where', 'aten::addcmul',
        'aten::addcdiv', 'aten::lerp', 'aten::masked_fill', 'aten::gelu_backward', 'aten::silu_backward',
        'aten::sigmoid_backward', 'aten::tanh_backward', 'aten::threshold_backward',
        'aten::hardtanh_backward', 'aten::leaky_relu_backward', 'aten::elu_backward',
        'aten::mish_backward', 'aten::softplus_backward', 'aten::hardswish_backward',
        'aten::hardsigmoid_backward', 'aten::native_dropout_backward', 'aten::native_dropout')
       OR (op_name IN ('aten::max', 'aten::min') AND dt[2] IS NOT NULL AND sh[2] IS NOT NULL)
),
pw_out AS (
    SELECT
        *,
        CASE WHEN out_arg THEN sh[len(dt)]
             WHEN inplace THEN tens[1].shape
             WHEN len(tens) > 0
             THEN list_reduce(list_transform(tens, lambda a: a.shape), lambda x, y: tw_broadcast(x, y)) END AS out_shape,
        CASE WHEN out_arg THEN dt[len(dt)]
             WHEN cmp THEN 'bool'
             WHEN inplace THEN tens[1].dtype
             -- the widest dtype among the tensor inputs of >= 1 dim (0-dim tensors and scalars
             -- do not promote); the condition of `where` is not a value input
             WHEN len(promoting) > 0
             THEN list_reduce(promoting, lambda x, y: CASE WHEN tw_dtype_bytes(y) > tw_dtype_bytes(x) THEN y ELSE x END)
             -- only 0-dim tensors: the first one's dtype; `where` of scalars: unknown
             WHEN op_name <> 'aten::where' THEN tens[1].dtype
        END AS dtout
    FROM (SELECT *, list_transform(list_filter(tens, lambda a: len(a.shape) >= 1 AND NOT (op_name = 'aten::where' AND a.i = 1)),
                                   lambda a: a.dtype) AS promoting
          FROM pw_args)
),
pointwise AS (
    SELECT
        * EXCLUDE (tens, promoting, cmp, inplace, per_elem, out_shape, dtout, ok, arity, out_arg),
        'pointwise' AS family,
        tens[1].dtype AS dtype,
        concat_ws(' ', 'elements=' || tw_numel(out_shape), 'inputs=' || len(tens),
                  CASE WHEN dtout <> tens[1].dtype THEN 'out=' || dtout END,
                  CASE WHEN inplace THEN 'in-place' END,
                  CASE WHEN out_arg THEN 'out-variant' END) AS params,
        CASE WHEN ok THEN 1.0 * per_elem * tw_numel(out_shape) END AS flops,
        CASE WHEN ok THEN
            (CASE WHEN base IN ('aten::fill', 'aten::zero') THEN 0
                  ELSE list_sum(list_transform(tens, lambda a: 1.0 * a.numel * tw_dtype_bytes(a.dtype))) END)
            + 1.0 * tw_numel(out_shape) * tw_dtype_bytes(dtout)
            + CASE WHEN op_name = 'aten::native_dropout' THEN 1.0 * tw_numel(out_shape) ELSE 0 END
        END AS bytes,
        'vector' AS roof,
        list_bool_or(list_transform(tens, lambda a: NOT a.cont)) AS non_contiguous,
        CASE WHEN NOT ok THEN 'pointwise inputs not recognised' END AS reason
    FROM (SELECT *, coalesce(len(tens) >= 1 AND tw_numel(out_shape) >= 0 AND tw_dtype_bytes(dtout) IS NOT NULL
                             AND list_bool_and(list_transform(tens, lambda a: tw_dtype_bytes(a.dtype) IS NOT NULL)), false) AS ok
          FROM pw_out)
),
-- ---------------------------------------------------------------- reductions
red_spec AS (
    SELECT *, CASE
        WHEN op_name IN ('aten::norm', 'aten::linalg_vector_norm') THEN {'dim': 3, 'keep': 4, 'dtype': CASE WHEN op_name = 'aten::linalg_vector_norm' THEN 5 ELSE 0 END, 'per': 2}
        WHEN op_name IN ('aten::var', 'aten::std', 'aten::var_mean', 'aten::std_mean') THEN {'dim': 2, 'keep': 4, 'dtype': 0, 'per': 3}
        WHEN op_name = 'aten::logsumexp' THEN {'dim': 2, 'keep': 3, 'dtype': 0, 'per': 3}
        WHEN op_name IN ('aten::cumsum', 'aten::cumprod') THEN {'dim': 0, 'keep': 0, 'dtype': 3, 'per': 1}
        WHEN op_name IN ('aten::sum', 'aten::mean', 'aten::prod', 'aten::nansum') THEN {'dim': 2, 'keep': 3, 'dtype': 4, 'per': 1}
        ELSE {'dim': 2, 'keep': 3, 'dtype': 0, 'per': 1}
    END AS rs
    FROM sig
    WHERE op_name IN ('aten::sum', 'aten::mean', 'aten::prod', 'aten::nansum', 'aten::amax', 'aten::amin',
                      'aten::argmax', 'aten::argmin', 'aten::all', 'aten::any', 'aten::norm',
                      'aten::linalg_vector_norm', 'aten::var', 'aten::std', 'aten::var_mean', 'aten::std_mean',
                      'aten::logsumexp', 'aten::cumsum', 'aten::cumprod', 'aten::count_nonzero')
       OR (op_name IN ('aten::max', 'aten::min') AND NOT (dt[2] IS NOT NULL AND sh[2] IS NOT NULL))
),
red_args AS (
    SELECT
        *,
        sh[1] AS x, dt[1] AS dtx, ne[1] AS e,
        -- the reduced dims: NULL or empty = every dim (a scalar dtype arg at the dim slot is not a dim)
        CASE WHEN rs.dim > 0 AND ty[rs.dim] IN ('ScalarList', 'Scalar', 'int', 'long int') THEN tw_int_list(ci[rs.dim]) END AS dims,
        CASE WHEN rs.dtype > 0 THEN tw_scalar_type(ci[rs.dtype]) END AS dtype_arg
    FROM red_spec
),
red_out AS (
    SELECT
        *,
        CASE WHEN rs.dim = 0 THEN e
             WHEN dims IS NULL OR len(dims) = 0 THEN 1
             ELSE e // nullif(tw_numel(list_transform(dims, lambda d: x[CASE WHEN d < 0 THEN d + len(x) + 1 ELSE d + 1 END])), 0)
        END AS out_numel,
        coalesce(dtype_arg,
                 CASE WHEN op_name IN ('aten::all', 'aten::any') THEN 'bool'
                      WHEN op_name IN ('aten::argmax', 'aten::argmin', 'aten::count_nonzero') THEN 'int64'
                      ELSE dtx END) AS dtout
    FROM red_args
),
reduction AS (
    SELECT
        * EXCLUDE (rs, x, dtx, e, dims, dtype_arg, out_numel, dtout, ok),
        'reduction' AS family,
        dtx AS dtype,
        concat_ws(' ', 'elements=' || e, 'out=' || out_numel,
                  CASE WHEN dims IS NOT NULL AND len(dims) > 0 THEN 'dim=' || array_to_string(dims, ',') END) AS params,
        CASE WHEN ok THEN 1.0 * rs.per * e END AS flops,
        CASE WHEN ok THEN 1.0 * e * tw_dtype_bytes(dtx) + 1.0 * out_numel * tw_dtype_bytes(dtout)
                          * CASE WHEN op_name IN ('aten::var_mean', 'aten::std_mean') THEN 2 ELSE 1 END
                          + CASE WHEN op_name IN ('aten::max', 'aten::min') AND dims IS NOT NULL AND len(dims) > 0
                                 THEN 8.0 * out_numel ELSE 0 END END AS bytes,
        'vector' AS roof,
        NOT cont[1] AS non_contiguous,
        CASE WHEN NOT ok THEN 'reduction arguments not recognised' END AS reason
    FROM (SELECT *, coalesce(e > 0 AND out_numel >= 1 AND tw_dtype_bytes(dtx) IS NOT NULL
                             AND tw_dtype_bytes(dtout) IS NOT NULL, false) AS ok FROM red_out)
),
-- ---------------------------------------------------------------- copies, casts, gathers
copy_args AS (
    SELECT
        *,
        CASE WHEN op_name = 'aten::copy_' THEN 2 ELSE 1 END AS src_i,
        CASE
            WHEN op_name = 'aten::copy_' THEN sh[2]
            WHEN op_name IN ('aten::clone', 'aten::contiguous', 'aten::_to_copy') THEN sh[1]
            WHEN op_name = 'aten::index_select' THEN CASE WHEN TRY_CAST(ci[2] AS BIGINT) IS NOT NULL THEN
                list_transform(range(1, len(sh[1]) + 1), lambda i: CASE
                    WHEN i = (CASE WHEN TRY_CAST(ci[2] AS BIGINT) < 0 THEN TRY_CAST(ci[2] AS BIGINT) + len(sh[1]) + 1
                                   ELSE TRY_CAST(ci[2] AS BIGINT) + 1 END) THEN ne[3] ELSE sh[1][i] END) END
            WHEN op_name = 'aten::gather' THEN sh[3]
            WHEN op_name = 'aten::embedding' THEN list_concat(sh[2], [sh[1][2]])
            WHEN op_name LIKE 'aten::upsample_nearest%' THEN list_concat(sh[1][1:2], tw_int_list(ci[2]))
            WHEN op_name = 'aten::_local_scalar_dense' THEN CAST([] AS BIGINT[])
        END AS out_shape,
        CASE
            WHEN op_name = 'aten::copy_' THEN dt[1]
            WHEN op_name = 'aten::_to_copy' THEN coalesce(tw_scalar_type(ci[2]), dt[1])
            ELSE dt[1]
        END AS dtout,
        CASE WHEN op_name IN ('aten::index_select', 'aten::gather') THEN 3
             WHEN op_name = 'aten::embedding' THEN 2 END AS idx_i
    FROM sig
    WHERE op_name IN ('aten::copy_', 'aten::clone', 'aten::contiguous', 'aten::_to_copy',
                      'aten::index_select', 'aten::gather', 'aten::embedding', 'aten::_local_scalar_dense',
                      'aten::upsample_nearest1d', 'aten::upsample_nearest2d', 'aten::upsample_nearest3d')
),
copies AS (
    SELECT
        * EXCLUDE (src_i, out_shape, dtout, idx_i, ok),
        CASE WHEN op_name = 'aten::embedding' THEN 'embedding' ELSE 'copy' END AS family,
        dt[src_i] AS dtype,
        concat_ws(' ', 'elements=' || tw_numel(out_shape),
                  CASE WHEN dtout <> dt[src_i] THEN 'cast ' || dt[src_i] || '->' || dtout END,
                  CASE WHEN idx_i IS NOT NULL THEN 'indices=' || ne[idx_i] END) AS params,
        CASE WHEN ok THEN 0.0 END AS flops,
        CASE WHEN NOT ok THEN NULL
             WHEN idx_i IS NOT NULL THEN 1.0 * ne[idx_i] * tw_dtype_bytes(dt[idx_i])
                  + 2.0 * tw_numel(out_shape) * tw_dtype_bytes(dtout)
             WHEN op_name = 'aten::copy_' THEN 1.0 * ne[2] * tw_dtype_bytes(dt[2])
                  + 1.0 * ne[1] * tw_dtype_bytes(dt[1])
             WHEN op_name LIKE 'aten::upsample_nearest%' THEN 1.0 * ne[1] * tw_dtype_bytes(dt[1])
                  + 1.0 * tw_numel(out_shape) * tw_dtype_bytes(dtout)
             ELSE 1.0 * tw_numel(out_shape) * (tw_dtype_bytes(dt[1]) + tw_dtype_bytes(dtout))
        END AS bytes,
        'vector' AS roof,
        CASE WHEN op_name = 'aten::copy_' THEN NOT (cont[1] AND cont[2])
             ELSE NOT cont[src_i] END AS non_contiguous,
        CASE WHEN NOT ok THEN 'copy arguments not recognised' END AS reason
    FROM (SELECT *, coalesce(tw_numel(out_shape) >= 0 AND tw_dtype_bytes(dt[src_i]) IS NOT NULL
                             AND tw_dtype_bytes(dtout) IS NOT NULL
                             AND (idx_i IS NULL OR tw_dtype_bytes(dt[idx_i]) IS NOT NULL), false) AS ok
          FROM copy_args)
),
embedding_bwd AS (
    SELECT
        * EXCLUDE (d, w_rows, ok),
        'embedding' AS family,
        dt[1] AS dtype,
        concat_ws(' ', 'rows=' || w_rows, 'D=' || d, 'indices=' || ne[2]) AS params,
        CASE WHEN ok THEN 1.0 * ne[1] END AS flops,
        CASE WHEN ok THEN 1.0 * ne[1] * tw_dtype_bytes(dt[1]) + 1.0 * ne[2] * tw_dtype_bytes(dt[2])
                          + 1.0 * w_rows * d * tw_dtype_bytes(dt[1]) END AS bytes,
        'vector' AS roof,
        NOT cont[1] AS non_contiguous,
        CASE WHEN NOT ok THEN 'embedding backward arguments not recognised' END AS reason
    FROM (SELECT *, sh[1][len(sh[1])] AS d, TRY_CAST(ci[3] AS BIGINT) AS w_rows,
                 coalesce(TRY_CAST(ci[3] AS BIGINT) > 0 AND tw_dtype_bytes(dt[1]) IS NOT NULL
                          AND tw_dtype_bytes(dt[2]) IS NOT NULL, false) AS ok
          FROM sig WHERE op_name = 'aten::embedding_dense_backward')
),
modelled AS (
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM gemm
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM grouped
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM attention
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM conv
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM norm
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM norm_bwd
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM softmax
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM pointwise
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM reduction
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM copies
    UNION ALL BY NAME
    SELECT * REPLACE (CAST(flops AS DOUBLE) AS flops, CAST(bytes AS DOUBLE) AS bytes) FROM embedding_bwd
)
SELECT
    s.run_id, s.op_name, s.input_dims, s.input_types, s.input_strides, s.concrete_inputs,
    m.family,
    coalesce(m.dtype, list_filter(s.dt, lambda d: d IS NOT NULL)[1]) AS dtype,
    CASE WHEN m.flops IS NOT NULL OR m.bytes IS NOT NULL THEN m.params END AS params,
    m.flops,
    m.bytes,
    m.roof,
    m.non_contiguous,
    CASE
        WHEN s.input_dims IS NULL THEN 'no Input Dims (profile with record_shapes=True)'
        WHEN m.family IS NULL AND list_contains(s.ty, 'TensorList')
            THEN 'no perf model: TensorList inputs (cat, stack, _foreach_*) are recorded without dtypes'
        WHEN m.family IS NULL THEN 'no perf model for this operator'
        WHEN m.flops IS NULL OR m.bytes IS NULL THEN coalesce(m.reason, 'arguments not recognised')
    END AS note
FROM sig s
LEFT JOIN modelled m USING (sig_id);
