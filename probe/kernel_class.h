/* kernel_class.h — which matrix unit a CUDA kernel ran on, told from its name (cuDNN, cuBLAS, CUTLASS,
 * TensorRT/xmma naming): CUDA cores (SIMT), warp-level tensor-core MMA (HMMA / IMMA, Volta to Ada,
 * also used on Hopper), Hopper warpgroup MMA (wgmma), or Blackwell tcgen05. A name is all there is:
 * a kernel that issues mma instructions under a name without these marks is classified SIMT. */
#ifndef FP_KERNEL_CLASS_H
#define FP_KERNEL_CLASS_H

/* The values are the store's ENUM_KERNEL_CLASS ids; 0 (a zeroed record) is "unknown", stored as NULL. */
typedef enum {
    FP_KCLASS_UNKNOWN = 0,   /* no name */
    FP_KCLASS_SIMT = 1,      /* CUDA cores: sgemm, ffma xmma tiles, elementwise, reductions, ... */
    FP_KCLASS_MMA = 2,       /* mma.sync / wmma: h884, s1688, i8816, h16816, tensorop, xmma ..._tensor16x8x16 */
    FP_KCLASS_WGMMA = 3,     /* Hopper wgmma: sm90_xmma ... warpgroupsize, gmma, cutlass3x_sm90 tensorop, nvjet */
    FP_KCLASS_TCGEN05 = 4,   /* Blackwell tcgen05 / umma: sm100_xmma, tcgen05, cutlass3x_sm100 tensorop */
    FP_KCLASS_COUNT
} fp_kernel_class;

/* Classify a (short or demangled) kernel name; NULL or "" is FP_KCLASS_UNKNOWN. Case-insensitive;
 * names longer than 4 KiB are classified by their first 4 KiB. Rules, first match wins:
 *   1. "ffma" or "simt" (xmma / CUTLASS tiles on CUDA cores): SIMT;
 *   2. "tcgen05", "umma" (not inside a word), "sm100_xmma", or "sm100" with "tensorop" or "nvjet": TCGEN05;
 *   3. "wgmma", "warpgroup", "sm90_xmma", "nvjet", "sm90" with "gmma" or "tensorop": WGMMA;
 *   4. "hmma", "imma", "wmma" (not inside a word), "mma_sync", "tensorop", "tensor_op", "tensor<digit>",
 *      "xmma", "tf32", an MMA tile mark (h / s / i then 884, 1688, 8816, 16816, 8832 or 16832, with no
 *      letter or digit before it and no digit after: "volta_h884gemm", "turing_fp16_s1688cudnn"), or
 *      "cutlass" with "f16" / "bf16": MMA;
 *   5. anything else (sgemm, elementwise, batchnorm, reductions, copies): SIMT. */
fp_kernel_class fp_kernel_classify(const char *name);

/* 1 for MMA, WGMMA and TCGEN05; 0 for SIMT; -1 for UNKNOWN or out of range (the store's tensorCore). */
int fp_kernel_class_tensor_core(fp_kernel_class c);

/* "simt", "mma", "wgmma", "tcgen05" ("unknown" otherwise): ENUM_KERNEL_CLASS's names. */
const char *fp_kernel_class_name(fp_kernel_class c);

#endif
