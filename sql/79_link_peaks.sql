-- 79_link_peaks.sql: peak bandwidth of the links collectives run over.
--
-- link_peaks  (view)
--   grain: one row per link generation.
--   columns: link (name, e.g. nvlink4, xgmi-mi300x, pcie5, ib-ndr), kind (nvlink | xgmi | pcie |
--            ib), gbps (peak bandwidth per GPU, one direction, GB/s = 1e9 bytes/s: the figure
--            nccl-tests' bus bandwidth approaches), device_regex (case-insensitive regex on a
--            run's device name: the GPUs whose intra-node link this is; NULL for links chosen
--            only by name), source
--   Per-GPU unidirectional figures from the vendors' published bidirectional totals (halved):
--     NVLink 2 (V100 SXM2): 300 GB/s total -> 150; NVLink 3 (A100 SXM): 600 -> 300; NVLink 4
--     (H100/H200 SXM): 900 -> 450; H800: 400 -> 200; NVLink 5 (B200/GB200): 1800 -> 900
--     (NVIDIA V100/A100/H100/H200/HGX B200 datasheets). AMD Infinity Fabric (xGMI): MI300X/
--     MI325X 7 links x 64 GB/s per direction = 448 (MI300X data sheet: 896 GB/s peak
--     aggregate); MI250X/MI250 GCD: 4 links x 50 = 200 (MI250X data sheet: 800 GB/s peak per
--     package, two GCDs). PCIe x16 per direction: gen3 15.75, gen4 31.5, gen5 63, gen6 121
--     (PCI-SIG). InfiniBand per port: EDR 12.5, HDR 25, NDR 50, XDR 100 (100/200/400/800 Gb/s).
--   A device not matched (PCIe cards, unknown names) has no default link: give one by name
--   (tracewh collectives --link pcie4) or a number (--link-peak-gbps).

CREATE OR REPLACE VIEW link_peaks AS
SELECT * FROM (VALUES
    ('nvlink2', 'nvlink', 150.0, 'v100-sxm|v100s-sxm', 'NVLink 2: 300 GB/s bidirectional (V100 SXM2 datasheet)'),
    ('nvlink3', 'nvlink', 300.0, 'a100-sxm|a100-pg|a100 80gb hbm2e|a800-sxm', 'NVLink 3: 600 GB/s bidirectional (A100 datasheet)'),
    ('nvlink4-h800', 'nvlink', 200.0, 'h800', 'H800 NVLink: 400 GB/s bidirectional (H800 datasheet)'),
    ('nvlink4', 'nvlink', 450.0, 'h100 80gb hbm3|h100-sxm|h200|gh200', 'NVLink 4: 900 GB/s bidirectional (H100/H200 SXM datasheets)'),
    ('nvlink5', 'nvlink', 900.0, 'b200|gb200|b300', 'NVLink 5: 1800 GB/s bidirectional (HGX B200 datasheet)'),
    ('xgmi-mi300x', 'xgmi', 448.0, 'mi300x|mi325x|mi300a', 'Infinity Fabric: 7 x 64 GB/s per direction (MI300X data sheet)'),
    ('xgmi-mi250', 'xgmi', 200.0, 'mi250', 'Infinity Fabric: 4 x 50 GB/s per GCD (MI250X data sheet)'),
    ('pcie3', 'pcie', 15.75, NULL, 'PCIe 3.0 x16 (PCI-SIG)'),
    ('pcie4', 'pcie', 31.5, NULL, 'PCIe 4.0 x16 (PCI-SIG)'),
    ('pcie5', 'pcie', 63.0, NULL, 'PCIe 5.0 x16 (PCI-SIG)'),
    ('pcie6', 'pcie', 121.0, NULL, 'PCIe 6.0 x16 (PCI-SIG)'),
    ('ib-edr', 'ib', 12.5, NULL, 'InfiniBand EDR 100 Gb/s per port'),
    ('ib-hdr', 'ib', 25.0, NULL, 'InfiniBand HDR 200 Gb/s per port'),
    ('ib-ndr', 'ib', 50.0, NULL, 'InfiniBand NDR 400 Gb/s per port'),
    ('ib-xdr', 'ib', 100.0, NULL, 'InfiniBand XDR 800 Gb/s per port')
) AS t(link, kind, gbps, device_regex, source);
