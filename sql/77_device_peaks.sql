-- 77_device_peaks.sql: peak throughput of the accelerators the roofline compares with.
--
-- device_peaks  (view)
--   grain: one row per known device (or per way of recognising one).
--   columns: device, vendor, name_regex (case-insensitive regex on deviceProperties' name; NULL:
--            recognised by arch_major/arch_minor/cus alone, for ROCm traces that name every
--            GPU 'AMD Radeon Graphics' or ''), min_mem_gib, max_mem_gib (bounds on
--            totalGlobalMem in GiB, lower inclusive, upper exclusive; NULL: none), arch_major,
--            arch_minor, cus (computeMajor, computeMinor, numSms of the arch-only rows),
--            priority (the lowest matching one wins; name rows before arch rows),
--            vector_tflops (FP32 on the vector/SIMT units: the roof of non-matrix ops),
--            fp32_tflops (FP32 matrix ops without TF32: the SIMT rate on NVIDIA, the FP32
--            MFMA rate on AMD), tf32_tflops, fp16_tflops, bf16_tflops, fp8_tflops, int8_tops
--            (dense tensor/matrix-core peaks, no sparsity; NULL where the device has none),
--            hbm_tbs (peak HBM bandwidth, TB/s = 1e12 bytes/s), source
--   Every figure is the vendor's published peak at boost clock. Where a datasheet gives the
--   figure "with sparsity" only, the dense peak is half of it. MI250X and MI250 are two GCDs
--   per package and PyTorch sees each GCD as one device: their rows hold half the package's
--   figures (and MI250's GCD equals an MI210). Sources (vendor datasheets and product pages):
--     [V100]  NVIDIA Tesla V100 datasheet (2020): SXM2 15.7 FP32 / 125 tensor TFLOPS, PCIe 14 /
--             112, V100S PCIe 16.4 / 130; HBM2 900 GB/s (V100S 1134 GB/s).
--     [A100]  NVIDIA A100 Tensor Core GPU datasheet (2021): FP32 19.5, TF32 156, BF16/FP16 312,
--             INT8 624 (dense); 40GB 1,555 GB/s, 80GB PCIe 1,935 GB/s, 80GB SXM 2,039 GB/s.
--     [H100]  NVIDIA H100 Tensor Core GPU datasheet (2023), sparse figures halved: SXM FP32 67,
--             TF32 494.5, BF16/FP16 989.5, FP8/INT8 1979, 3.35 TB/s; PCIe FP32 51, TF32 378,
--             BF16/FP16 756.5, FP8/INT8 1513, 2.0 TB/s; NVL FP32 60, TF32 417.5, BF16/FP16
--             835.5, FP8/INT8 1670.5, 3.9 TB/s.
--     [H200]  NVIDIA H200 Tensor Core GPU datasheet (2024): SXM as H100 SXM with 4.8 TB/s; NVL
--             as H100 NVL with 4.8 TB/s.
--     [B200]  NVIDIA HGX B200 / GB200 NVL72 datasheet (2025), per GPU, sparse halved: HGX B200
--             FP32 75, TF32 1100, BF16/FP16 2250, FP8/INT8 4500, 7.7 TB/s; GB200 FP32 80, TF32
--             1250, BF16/FP16 2500, FP8/INT8 5000, 8 TB/s.
--     [MI200] AMD Instinct MI210 / MI250 / MI250X data sheets (2022): MI210 FP32 vector 22.6,
--             matrix 45.3, FP16/BF16/INT8 181.0, 1.6 TB/s (1638.4 GB/s); MI250X package 47.9 /
--             95.7 / 383.0 and 3.2768 TB/s; MI250 package 45.3 / 90.5 / 362.1 and 3.2768 TB/s.
--     [MI300] AMD Instinct MI300X / MI300A data sheets (2023), MI325X (2024): MI300X FP32
--             163.4, TF32 653.7, FP16/BF16 1307.4, FP8/INT8 2614.9, 5.3 TB/s; MI300A 122.6,
--             490.3, 980.6, 1961.2, 5.3 TB/s; MI325X as MI300X with 6.0 TB/s.
--     [MI350] AMD Instinct MI350 series data sheet (2025): MI355X FP32 157.3, FP16/BF16 2516.6,
--             FP8/INT8 5033.2, 8 TB/s; MI350X 144.2, 2306.9, 4613.7, 8 TB/s (CDNA 4 has no TF32).
--
-- run_device(run_list)  (table macro)
--   grain: one row per run of `run_list` (VARCHAR[]).
--   columns: run_id, device_name (deviceProperties[0].name, else runs.device_name), device
--            (the matched device_peaks row; NULL when unknown), vector_tflops, fp32_tflops,
--            tf32_tflops, fp16_tflops, bf16_tflops, fp8_tflops, int8_tops, hbm_tbs, source
--   The run's first deviceProperties entry is matched (a trace's devices are one model in
--   practice): by name_regex (and memory bounds) first, else by computeMajor, computeMinor
--   and numSms on a warp-64 (AMD) device.
--
-- tw_peak_tflops(d, roof)  (scalar macro)
--   the compute peak of run_device row `d` (a struct) for a roof label (vector, fp32, tf32,
--   fp16, bf16, fp8, int8); NULL when unknown.

CREATE OR REPLACE VIEW device_peaks AS
SELECT * FROM (VALUES
    -- device, vendor, name_regex, min_mem_gib, max_mem_gib, arch_major, arch_minor, cus, priority,
    -- vector, fp32, tf32, fp16, bf16, fp8, int8, hbm_tbs, source
    ('V100S PCIe', 'NVIDIA', 'V100S', NULL, NULL, NULL, NULL, NULL, 1,
        16.4, 16.4, NULL, 130.0, NULL, NULL, NULL, 1.134, 'V100'),
    ('V100 PCIe', 'NVIDIA', 'V100.*PCIE', NULL, NULL, NULL, NULL, NULL, 2,
        14.0, 14.0, NULL, 112.0, NULL, NULL, NULL, 0.9, 'V100'),
    ('V100 SXM2', 'NVIDIA', 'V100', NULL, NULL, NULL, NULL, NULL, 3,
        15.7, 15.7, NULL, 125.0, NULL, NULL, NULL, 0.9, 'V100'),
    ('A100 PCIe 40GB', 'NVIDIA', 'A100.*PCIE', NULL, 60.0, NULL, NULL, NULL, 1,
        19.5, 19.5, 156.0, 312.0, 312.0, NULL, 624.0, 1.555, 'A100'),
    ('A100 PCIe 80GB', 'NVIDIA', 'A100.*PCIE', 60.0, NULL, NULL, NULL, NULL, 1,
        19.5, 19.5, 156.0, 312.0, 312.0, NULL, 624.0, 1.935, 'A100'),
    ('A100 SXM4 40GB', 'NVIDIA', 'A100', NULL, 60.0, NULL, NULL, NULL, 2,
        19.5, 19.5, 156.0, 312.0, 312.0, NULL, 624.0, 1.555, 'A100'),
    ('A100 SXM4 80GB', 'NVIDIA', 'A100', 60.0, NULL, NULL, NULL, NULL, 2,
        19.5, 19.5, 156.0, 312.0, 312.0, NULL, 624.0, 2.039, 'A100'),
    ('H100 PCIe', 'NVIDIA', 'H100.*PCIE', NULL, NULL, NULL, NULL, NULL, 1,
        51.0, 51.0, 378.0, 756.5, 756.5, 1513.0, 1513.0, 2.0, 'H100'),
    ('H100 NVL', 'NVIDIA', 'H100.*NVL', NULL, NULL, NULL, NULL, NULL, 1,
        60.0, 60.0, 417.5, 835.5, 835.5, 1670.5, 1670.5, 3.9, 'H100'),
    ('H100 SXM', 'NVIDIA', 'H100', NULL, NULL, NULL, NULL, NULL, 2,
        67.0, 67.0, 494.5, 989.5, 989.5, 1979.0, 1979.0, 3.35, 'H100'),
    ('H200 NVL', 'NVIDIA', 'H200.*NVL', NULL, NULL, NULL, NULL, NULL, 1,
        60.0, 60.0, 417.5, 835.5, 835.5, 1670.5, 1670.5, 4.8, 'H200'),
    ('H200 SXM', 'NVIDIA', 'H200', NULL, NULL, NULL, NULL, NULL, 2,
        67.0, 67.0, 494.5, 989.5, 989.5, 1979.0, 1979.0, 4.8, 'H200'),
    ('GB200', 'NVIDIA', 'GB200', NULL, NULL, NULL, NULL, NULL, 1,
        80.0, 80.0, 1250.0, 2500.0, 2500.0, 5000.0, 5000.0, 8.0, 'B200'),
    ('B200', 'NVIDIA', 'B200', NULL, NULL, NULL, NULL, NULL, 2,
        75.0, 75.0, 1100.0, 2250.0, 2250.0, 4500.0, 4500.0, 7.7, 'B200'),
    ('MI210', 'AMD', 'MI210', NULL, NULL, NULL, NULL, NULL, 1,
        22.6, 45.3, NULL, 181.0, 181.0, NULL, 181.0, 1.6384, 'MI200'),
    ('MI250X (one GCD)', 'AMD', 'MI250X', NULL, NULL, NULL, NULL, NULL, 1,
        23.95, 47.85, NULL, 191.5, 191.5, NULL, 191.5, 1.6384, 'MI200'),
    ('MI250 (one GCD)', 'AMD', 'MI250', NULL, NULL, NULL, NULL, NULL, 2,
        22.65, 45.25, NULL, 181.05, 181.05, NULL, 181.05, 1.6384, 'MI200'),
    ('MI300A', 'AMD', 'MI300A', NULL, NULL, NULL, NULL, NULL, 1,
        122.6, 122.6, 490.3, 980.6, 980.6, 1961.2, 1961.2, 5.3, 'MI300'),
    ('MI300X', 'AMD', 'MI300X', NULL, NULL, NULL, NULL, NULL, 1,
        163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9, 5.3, 'MI300'),
    ('MI325X', 'AMD', 'MI325X', NULL, NULL, NULL, NULL, NULL, 1,
        163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9, 6.0, 'MI300'),
    ('MI350X', 'AMD', 'MI350X', NULL, NULL, NULL, NULL, NULL, 1,
        144.2, 144.2, NULL, 2306.9, 2306.9, 4613.7, 4613.7, 8.0, 'MI350'),
    ('MI355X', 'AMD', 'MI355X', NULL, NULL, NULL, NULL, NULL, 1,
        157.3, 157.3, NULL, 2516.6, 2516.6, 5033.2, 5033.2, 8.0, 'MI350'),
    -- ROCm traces that do not name the device: gfx90a with 104 CUs is an MI210 or one GCD of
    -- an MI250 (the same peaks), with 110 CUs one GCD of an MI250X; gfx942 with 304 CUs is an
    -- MI300X (192 GB) or MI325X (256 GB), with 228 CUs an MI300A
    ('MI210 / MI250 (one GCD)', 'AMD', NULL, NULL, NULL, 9, 0, 104, 10,
        22.6, 45.3, NULL, 181.0, 181.0, NULL, 181.0, 1.6384, 'MI200'),
    ('MI250X (one GCD)', 'AMD', NULL, NULL, NULL, 9, 0, 110, 10,
        23.95, 47.85, NULL, 191.5, 191.5, NULL, 191.5, 1.6384, 'MI200'),
    ('MI300X', 'AMD', NULL, NULL, 224.0, 9, 4, 304, 10,
        163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9, 5.3, 'MI300'),
    ('MI325X', 'AMD', NULL, 224.0, NULL, 9, 4, 304, 10,
        163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9, 6.0, 'MI300'),
    ('MI300A', 'AMD', NULL, NULL, NULL, 9, 4, 228, 10,
        122.6, 122.6, 490.3, 980.6, 980.6, 1961.2, 1961.2, 5.3, 'MI300')
) AS t(device, vendor, name_regex, min_mem_gib, max_mem_gib, arch_major, arch_minor, cus, priority,
       vector_tflops, fp32_tflops, tf32_tflops, fp16_tflops, bf16_tflops, fp8_tflops, int8_tops,
       hbm_tbs, source);

CREATE OR REPLACE MACRO run_device(run_list) AS TABLE
WITH r AS (
    SELECT
        run_id,
        coalesce(nullif(json_extract_string(metadata_json, '$.deviceProperties[0].name'), ''),
                 device_name) AS device_name,
        TRY_CAST(json_extract(metadata_json, '$.deviceProperties[0].totalGlobalMem') AS DOUBLE)
            / 1073741824.0 AS mem_gib,
        TRY_CAST(json_extract(metadata_json, '$.deviceProperties[0].computeMajor') AS INTEGER) AS major,
        TRY_CAST(json_extract(metadata_json, '$.deviceProperties[0].computeMinor') AS INTEGER) AS minor,
        TRY_CAST(json_extract(metadata_json, '$.deviceProperties[0].numSms') AS INTEGER) AS num_sms,
        TRY_CAST(json_extract(metadata_json, '$.deviceProperties[0].warpSize') AS INTEGER) AS warp
    FROM runs
    WHERE list_contains(CAST(run_list AS VARCHAR[]), run_id)
),
m AS (
    SELECT
        r.run_id, p.*,
        row_number() OVER (PARTITION BY r.run_id ORDER BY p.priority, p.device) AS rk
    FROM r
    JOIN device_peaks p
      ON ((p.name_regex IS NOT NULL AND regexp_matches(coalesce(r.device_name, ''), p.name_regex, 'i'))
          OR (p.name_regex IS NULL AND r.warp = 64 AND p.arch_major = r.major
              AND p.arch_minor = r.minor AND p.cus = r.num_sms))
     AND (p.min_mem_gib IS NULL OR r.mem_gib >= p.min_mem_gib)
     AND (p.max_mem_gib IS NULL OR r.mem_gib < p.max_mem_gib)
)
SELECT
    r.run_id, r.device_name, m.device, m.vector_tflops, m.fp32_tflops, m.tf32_tflops,
    m.fp16_tflops, m.bf16_tflops, m.fp8_tflops, m.int8_tops, m.hbm_tbs, m.source
FROM r
LEFT JOIN m ON m.run_id = r.run_id AND m.rk = 1;

CREATE OR REPLACE MACRO tw_peak_tflops(d, roof) AS CASE roof
    WHEN 'vector' THEN d.vector_tflops
    WHEN 'fp32' THEN d.fp32_tflops
    WHEN 'tf32' THEN d.tf32_tflops
    WHEN 'fp16' THEN d.fp16_tflops
    WHEN 'bf16' THEN d.bf16_tflops
    WHEN 'fp8' THEN d.fp8_tflops
    WHEN 'int8' THEN d.int8_tops
END;
