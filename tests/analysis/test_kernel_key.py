"""kernel_key (sql/06_kernel_key.sql): hand-checked normalisations and the collision rule."""

from __future__ import annotations

import pytest
from fixtures import query, warehouse

# (raw name, expected kernel key when nothing collides); checked by hand
HAND_CHECKED = [
    ("triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul"),
    ("triton_poi_fused_add_mul_17", "triton_poi_fused_add_mul"),
    ("triton_red_fused__softmax_3", "triton_red_fused__softmax"),
    ("triton_per_fused_native_layer_norm_0d1d2d3d4d5de6de", "triton_per_fused_native_layer_norm_#"),
    ("fused_gemm_kernel_3fa9c1e2b7d4", "fused_gemm_kernel_#"),
    ("kernel_unified_attention_2d", "kernel_unified_attention_2d"),
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     "at::native::vectorized_elementwise_kernel<N, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, N> >"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)",
     "at::native::reduce_kernel<N, N, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, N> >"),
    ("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 8, false, false>(float*, float const*, int, int, int, bool const*, int, bool)",
     "at::native::softmax_warp_forward<float, float, float, N, false, false>"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1})",
     "at::native::elementwise_kernel<N, N, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#}::operator()() const::{lambda()#}::operator()() const::{lambda(float)#}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#}::operator()() const::{lambda()#}::operator()() const::{lambda(float)#} const&)::{lambda(int)#}>"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x256_MI16x16x1_SN_LDSB1_AFC1_AFEM1_GRVWA8_ISA942_IU1_K1",
     "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs"),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1", "Cijk_Ailk_Bljk_HHS_BH"),
]


@pytest.fixture(scope="module")
def con():  # type: ignore[no-untyped-def]
    return warehouse(gpu_ops=[{"run_id": f"r{i}", "name": n} for i, (n, _) in enumerate(HAND_CHECKED)])


@pytest.mark.parametrize(("name", "key"), HAND_CHECKED)
def test_hand_checked_keys(con, name: str, key: str) -> None:  # type: ignore[no-untyped-def]
    got = query(con, "SELECT kernel_key, key_level FROM kernel_keys WHERE name = ?", [name])
    assert got.rows() == [(key, "coarse")]


def _keys(ops: list[tuple[str, str]]) -> dict[str, str]:
    con = warehouse(gpu_ops=[{"run_id": r, "name": n} for r, n in ops])
    return dict(query(con, "SELECT name, kernel_key FROM kernel_keys").rows())


def test_a_recompiled_kernel_keeps_its_key_across_runs() -> None:
    keys = _keys([("night1", "triton_poi_fused_add_0"), ("night2", "triton_poi_fused_add_4"),
                  ("night1", "Cijk_Alik_Bljk_HHS_BH_MT64x64x32_MI16_SN"),
                  ("night2", "Cijk_Alik_Bljk_HHS_BH_MT128x64x32_MI32_SN")])  # fmt: skip
    assert keys["triton_poi_fused_add_0"] == keys["triton_poi_fused_add_4"] == "triton_poi_fused_add"
    assert keys["Cijk_Alik_Bljk_HHS_BH_MT64x64x32_MI16_SN"] == "Cijk_Alik_Bljk_HHS_BH"
    assert keys["Cijk_Alik_Bljk_HHS_BH_MT128x64x32_MI32_SN"] == "Cijk_Alik_Bljk_HHS_BH"


def test_kernels_side_by_side_in_one_run_stay_distinct() -> None:
    keys = _keys([("night1", "triton_poi_fused_add_0"), ("night1", "triton_poi_fused_add_1"),
                  ("night1", "Cijk_Alik_Bljk_HHS_BH_MT64x64x32_MI16_SN"),
                  ("night1", "Cijk_Alik_Bljk_HHS_BH_MT128x64x32_MI32_SN"),
                  ("night2", "Cijk_Alik_Bljk_HHS_BH_MT128x64x32_MI16_SN"),
                  ("night2", "Cijk_Alik_Bljk_HHS_BH_MT128x64x32_MI32_SN")])  # fmt: skip
    assert keys["triton_poi_fused_add_0"] == "triton_poi_fused_add_0"
    assert keys["triton_poi_fused_add_1"] == "triton_poi_fused_add_1"
    # two tiles in one run: the tile stays in the key; the other tuning parameters go...
    assert keys["Cijk_Alik_Bljk_HHS_BH_MT64x64x32_MI16_SN"] == "Cijk_Alik_Bljk_HHS_BH_MT64x64x32"
    # ... unless they too tell apart two kernels of one run
    assert keys["Cijk_Alik_Bljk_HHS_BH_MT128x64x32_MI32_SN"] == "Cijk_Alik_Bljk_HHS_BH_MT128x64x32_MI32_SN"
    assert len(set(keys.values())) == len(keys)  # every name its own key here


def test_history_by_kernel_key_follows_a_renamed_kernel() -> None:
    ops = [{"run_id": "n1", "name": "triton_poi_fused_add_0", "cat": "kernel", "ts_ns": 0, "dur_ns": 100},
           {"run_id": "n2", "name": "triton_poi_fused_add_4", "cat": "kernel", "ts_ns": 0, "dur_ns": 120},
           {"run_id": "n2", "name": "triton_poi_fused_add_4", "cat": "kernel", "ts_ns": 200, "dur_ns": 110},
           {"run_id": "n2", "name": "other", "cat": "kernel", "ts_ns": 500, "dur_ns": 7},
           {"run_id": "n3", "name": "other", "cat": "kernel", "ts_ns": 0, "dur_ns": 7}]  # fmt: skip
    runs = [{"run_id": "n1", "start_ns": 1}, {"run_id": "n2", "start_ns": 2},
            {"run_id": "n3", "start_ns": 3}]  # fmt: skip
    con = warehouse(runs=runs, gpu_ops=ops)
    got = query(con, "SELECT run_id, kernels, calls, time_per_step_ns FROM metric_history("
                     "key_name := 'triton_poi_fused_add') ORDER BY run_id")  # fmt: skip
    # by key the series is one kernel: `kernels` counts the key (1 where it ran)
    assert got.rows() == [("n1", 1, 1, 100.0), ("n2", 1, 2, 230.0), ("n3", 0, 0, 0.0)]
    # a raw-name pattern alone finds one night each, and counts raw names
    one = query(con, "SELECT kernels, calls FROM metric_history(kernel_pattern := 'fused_add')"
                     " ORDER BY run_id")  # fmt: skip
    assert one.rows() == [(1, 1), (1, 2), (0, 0)]
    assert query(con, "SELECT calls FROM metric_history(kernel_pattern := 'fused_add_0')"
                      " ORDER BY run_id")["calls"].to_list() == [1, 0, 0]  # fmt: skip


def test_series_values_resolve_keys_over_every_name_whatever_the_filter() -> None:
    """Two Triton kernels side by side in one run keep their fine keys even when a filter
    matches only one of them (the keys of the kernel_keys view, from the same scan)."""
    ops = [{"run_id": "n1", "name": "triton_poi_fused_add_0", "short_name": "triton_poi_fused_add_0",
            "cat": "kernel", "category": "triton", "ts_ns": 0, "dur_ns": 100},
           {"run_id": "n1", "name": "triton_poi_fused_add_1", "short_name": "triton_poi_fused_add_1",
            "cat": "kernel", "category": "triton", "ts_ns": 200, "dur_ns": 50},
           {"run_id": "n2", "name": "triton_poi_fused_add_3", "short_name": "triton_poi_fused_add_3",
            "cat": "kernel", "category": "triton", "ts_ns": 0, "dur_ns": 90}]  # fmt: skip
    runs = [{"run_id": "n1", "start_ns": 1}, {"run_id": "n2", "start_ns": 2}]
    con = warehouse(runs=runs, gpu_ops=ops)
    view = dict(query(con, "SELECT name, kernel_key FROM kernel_keys").rows())
    assert view["triton_poi_fused_add_0"] == "triton_poi_fused_add_0"  # apart in run n1
    assert view["triton_poi_fused_add_3"] == "triton_poi_fused_add_3"
    for args in ("", "kernel_pattern := 'add_0'", "category_name := 'triton'"):
        got = query(con, f"SELECT run_id, key, name, value FROM series_values({args}) "
                         "WHERE metric = 'kernel' ORDER BY run_id, key")  # fmt: skip
        for _run, key, name, value in got.rows():
            assert key == view[name], (args, name)
            assert value == {"triton_poi_fused_add_0": 100, "triton_poi_fused_add_1": 50,
                             "triton_poi_fused_add_3": 90}[name]  # fmt: skip
        names = {r[2] for r in got.rows()}
        assert names == ({"triton_poi_fused_add_0"} if "add_0" in args else set(view))
