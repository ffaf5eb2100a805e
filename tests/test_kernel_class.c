/* test_kernel_class.c — fp_kernel_classify on kernel names as cuDNN, cuBLAS, CUTLASS, TensorRT and
 * PyTorch print them in nsys / CUPTI / TensorRT logs (from public profiles; the ones marked "composed"
 * follow the library's naming scheme but were not seen in a trace), plus the edge cases of the rules
 * (no name, marks inside words, ffma xmma tiles, tile digits inside longer numbers). */
#include <stdlib.h>
#include <string.h>
#include "probe/kernel_class.h"
#include "tap.h"

typedef struct {
    const char *name;
    fp_kernel_class want;
} case_t;

static const case_t cases[] = {
    /* Volta / Turing / Ampere cuBLAS and cuDNN: mma.sync tiles */
    {"volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", FP_KCLASS_MMA},
    {"volta_h884gemm_64x64_ldg8_nn", FP_KCLASS_MMA},
    {"turing_fp16_s1688cudnn_fp16_256x128_ldg8_relu_filter1x1_stg8_interior_nchw_nn_v1", FP_KCLASS_MMA},
    {"turing_fp16_s1688cudnn_fp16_128x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1", FP_KCLASS_MMA},
    {"ampere_fp16_s1688gemm_fp16_128x128_ldg8_f2f_stages_32x1_nn_kernel", FP_KCLASS_MMA},
    {"ampere_h16816gemm_256x128_ldg8_stages_64x3_tn", FP_KCLASS_MMA},
    {"trt_ampere_h16816gemm_128x64_ldg8_nn_v1", FP_KCLASS_MMA},
    {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn", FP_KCLASS_MMA},
    {"turing_i8816gemm_int8_128x128_ldg16_nt", FP_KCLASS_MMA},
    {"sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x64x32_stage3_warpsize2x2x1_tensor16x8x16_kernel", FP_KCLASS_MMA},
    {"sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize32x32x64_stage6_warpsize2x2x1_tensor16x8x16_execute_kernel__5x_cublas",
     FP_KCLASS_MMA},
    {"sm80_xmma_fprop_implicit_gemm_indexed_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize256x128x32_stage3_warpsize4x2x1_g1_"
     "tensor16x8x16", FP_KCLASS_MMA},
    {"sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1_"
     "tensor16x8x8", FP_KCLASS_MMA},
    {"cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8", FP_KCLASS_MMA},
    {"cutlass_80_tensorop_s1688tf32gemm_256x128_16x3_nn_align4", FP_KCLASS_MMA},
    /* composed: */
    {"void cutlass::Kernel<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>(Params)", FP_KCLASS_MMA},
    {"void cutlass::Kernel<cutlass_70_wmma_f16_gemm>(cutlass_70_wmma_f16_gemm::Params)", FP_KCLASS_MMA},
    {"void nvcuda::wmma_kernel<__half>(const __half*, float*)", FP_KCLASS_MMA},
    /* Hopper: warpgroup MMA */
    {"sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     FP_KCLASS_WGMMA},
    {"sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_"
     "execute_kernel__5x_cudnn", FP_KCLASS_WGMMA},
    {"nvjet_hsh_192x192_64x3_2x1_v_bz_coopB_NTN", FP_KCLASS_WGMMA},
    {"nvjet_tst_128x128_64x4_1x2_h_bz_coopA_NNT", FP_KCLASS_WGMMA},
    {"cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_128x128x64_1x2x1_0_tnn_align8_warpspecialized_cooperative_epi_tma",
     FP_KCLASS_WGMMA},
    {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, "
     "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, "
     "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1>>, cutlass::gemm::KernelTmaWarpSpecialized>>>>(Params)",
     FP_KCLASS_WGMMA},
    /* Blackwell (composed) */
    {"cutlass3x_sm100_tensorop_gemm_bf16_bf16_f32_bf16_bf16_256x128x64_2x1x1_0_tnn_align8_1sm", FP_KCLASS_TCGEN05},
    {"sm100_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_cgasize2x1x1_execute_kernel", FP_KCLASS_TCGEN05},
    /* CUDA cores */
    {"sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize128x16x8_stage3_warpsize4x1x1_g1_ffma_"
     "aligna4_alignc4", FP_KCLASS_SIMT},
    {"sm80_xmma_fprop_implicit_gemm_indexed_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize64x64x8_stage3_warpsize1x4x1_g1_"
     "ffma_aligna4_alignc4", FP_KCLASS_SIMT},
    {"ampere_sgemm_128x64_nn", FP_KCLASS_SIMT},
    {"volta_sgemm_128x64_nt", FP_KCLASS_SIMT},
    {"maxwell_scudnn_128x64_relu_interior_nn", FP_KCLASS_SIMT},
    {"void cutlass::Kernel<cutlass_simt_sgemm_128x128_8x2_nn_align1>(cutlass_simt_sgemm_128x128_8x2_nn_align1::Params)",
     FP_KCLASS_SIMT},
    {"implicit_convolve_sgemm", FP_KCLASS_SIMT},
    {"void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*)",
     FP_KCLASS_SIMT},
    {"void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::"
     "nchw2nhwc_params_t<float>, float const*, float*)", FP_KCLASS_SIMT},
    {"cudnn::gemm::computeOffsetsKernel", FP_KCLASS_SIMT},
    {"batch_norm_transform_input_kernel", FP_KCLASS_SIMT},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3>>(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     FP_KCLASS_SIMT},
    {"void at::native::(anonymous namespace)::max_pool_forward_nhwc<float, float>(float const*, int, int)", FP_KCLASS_SIMT},
    {"void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, true>(cublasLt::cublasSplitKParams<float>)",
     FP_KCLASS_SIMT},
    {"void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(float, float)",
     FP_KCLASS_SIMT},
    {"fp_cuda_histogram_kernel", FP_KCLASS_SIMT},   /* composed: ours */
    /* rule edges */
    {"reduce_summary_kernel", FP_KCLASS_SIMT},            /* "umma" inside a word */
    {"shimmable_kernel", FP_KCLASS_SIMT},                 /* "imma" inside a word */
    {"conv_s18840_kernel", FP_KCLASS_SIMT},               /* tile digits continue: not a tile */
    {"buffers1688", FP_KCLASS_SIMT},                      /* letter before the [hsi]: not a tile */
    {"VOLTA_H884GEMM_64X64_LDG8_NN", FP_KCLASS_MMA},      /* case-insensitive */
    {"", FP_KCLASS_UNKNOWN},
};

int main(void)
{
    const size_t n = sizeof cases / sizeof *cases;
    tap_plan((int)n + 6);
    for (size_t i = 0; i < n; i++) {
        fp_kernel_class got = fp_kernel_classify(cases[i].name);
        tap_ok(got == cases[i].want, "%s: %s", fp_kernel_class_name(cases[i].want), cases[i].name);
        if (got != cases[i].want)
            tap_diag("got %s", fp_kernel_class_name(got));
    }
    tap_ok(fp_kernel_classify(NULL) == FP_KCLASS_UNKNOWN, "NULL name: unknown");
    tap_ok(fp_kernel_class_tensor_core(FP_KCLASS_SIMT) == 0 && fp_kernel_class_tensor_core(FP_KCLASS_MMA) == 1 &&
               fp_kernel_class_tensor_core(FP_KCLASS_WGMMA) == 1 && fp_kernel_class_tensor_core(FP_KCLASS_TCGEN05) == 1 &&
               fp_kernel_class_tensor_core(FP_KCLASS_UNKNOWN) == -1,
           "tensor_core flag from the class: 0 SIMT, 1 the MMA kinds, -1 unknown");
    tap_is_str(fp_kernel_class_name(FP_KCLASS_WGMMA), "wgmma", "class names");
    tap_is_str(fp_kernel_class_name((fp_kernel_class)7), "unknown", "out-of-range class name");
    /* a name longer than the 4 KiB window: classified by its start */
    char *big = malloc(9000);
    memset(big, 'a', 8999);
    big[8999] = '\0';
    memcpy(big, "volta_h884gemm_", 15);
    tap_ok(fp_kernel_classify(big) == FP_KCLASS_MMA, "a 9000-character name is classified by its first 4 KiB (mark at start)");
    memcpy(big, "aaaaaaaaaaaaaaa", 15);
    memcpy(big + 8000, "_h884gemm", 9);
    tap_ok(fp_kernel_classify(big) == FP_KCLASS_SIMT, "a mark beyond 4 KiB is not seen");
    free(big);
    return tap_done();
}
