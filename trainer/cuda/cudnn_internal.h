/* cudnn_internal.h — what the files behind cudnn_ops.h share and nothing else includes: the context's
 * layout, error reporting that names op, layer label and library status, dtype mapping, descriptor
 * setup and the shared workspace / scratch buffers. */
#ifndef FP_CUDNN_INTERNAL_H
#define FP_CUDNN_INTERNAL_H

#include <cuda_runtime_api.h>
#include <cudnn.h>
/* cublasLt.h declares one function with "()" — not our warning to fix. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include "trainer/cuda/cudnn_ops.h"

typedef struct fpc_conv_plan fpc_conv_plan;   /* cudnn_conv.c */
typedef struct fpc_mm_plan fpc_mm_plan;       /* cublas_linear.c */

struct fp_cudnn {
    fp_cudnn_config cfg;
    cudnnHandle_t dnn;
    cublasLtHandle_t lt;
    cudaStream_t stream;
    int own_stream;
    void *ws;                     /* the one shared workspace */
    size_t ws_bytes, ws_need;
    int ws_allocs;
    char label[64];
    fpc_conv_plan **convs;        /* cached plans, searched linearly (a ResNet has a few dozen shapes) */
    int nconv, capconv;
    fpc_mm_plan **mms;
    int nmm, capmm;
    cudnnTensorDescriptor_t td[4];        /* scratch descriptors, set per call */
    cudnnPoolingDescriptor_t pool;
    cudnnActivationDescriptor_t act;
    float *scratch;               /* device floats for outputs a caller did not want (BN) */
    size_t scratch_floats;
    void *ones;                   /* device vector of ones (linear bias gradient), in ones_dt */
    size_t ones_n;
    fp_dtype ones_dt;
    int bn_persistent_broken;     /* set when cuDNN refused persistent mode once: SPATIAL from then on */
    int bn_ex_off;                /* set when the Ex batchnorm entry points are refused or need a reserve */
};

/* Failures: each records "cudnn <op> [label]: <status> (<detail>)" and returns the FP_E* code. */
int fpc_fail_cudnn(const fp_cudnn *d, cudnnStatus_t s, const char *op);
int fpc_fail_cublas(const fp_cudnn *d, cublasStatus_t s, const char *op);
int fpc_fail_cuda(const fp_cudnn *d, cudaError_t e, const char *op);
int fpc_fail_arg(const fp_cudnn *d, const char *op, const char *why);

#define FPC_DNN(d, call, op) do { cudnnStatus_t fpc_s_ = (call); \
        if (fpc_s_ != CUDNN_STATUS_SUCCESS) return fpc_fail_cudnn((d), fpc_s_, (op)); } while (0)
#define FPC_LT(d, call, op) do { cublasStatus_t fpc_s_ = (call); \
        if (fpc_s_ != CUBLAS_STATUS_SUCCESS) return fpc_fail_cublas((d), fpc_s_, (op)); } while (0)

/* Storage dtype -> cuDNN / CUDA data type; 0 on success, -1 for a non-storage dtype (TF32, junk). */
int fpc_cudnn_type(fp_dtype dt, cudnnDataType_t *out);
int fpc_cuda_type(fp_dtype dt, cudaDataType_t *out);
const char *fpc_dtype_name(fp_dtype dt);

size_t fpc_elems(fp_dims d);
/* t non-NULL with data, positive dims, a storage dtype and at most INT_MAX elements; else FP_EINVAL. */
int fpc_check_tensor(const fp_cudnn *d, const fp_dtensor *t, const char *op, const char *name);
int fpc_same_dtype(const fp_cudnn *d, const char *op, const fp_dtensor *a, const fp_dtensor *b);
int fpc_same_dims(const fp_cudnn *d, const char *op, fp_dims a, fp_dims b, const char *what);
/* An NHWC 4-d descriptor of dims / dtype. */
int fpc_set_nhwc(const fp_cudnn *d, cudnnTensorDescriptor_t td, fp_dims dims, fp_dtype dt, const char *op);

/* The workspace holds at least `bytes` (grows: cudaFree + cudaMalloc, counted). Records the need too. */
int fpc_workspace_ensure(fp_cudnn *d, size_t bytes, const char *op);
void fpc_workspace_note(fp_cudnn *d, size_t bytes);
/* cudnn_bn.c: a skipped (NULL) *dgamma / *dbeta pointed at zeroed scratch of c floats (cuDNN writes both). */
int fpc_bn_param_grads(fp_cudnn *d, size_t c, float **dgamma, float **dbeta, const char *op);
/* d->scratch holds at least `floats` floats. */
int fpc_scratch(fp_cudnn *d, size_t floats, const char *op);

/* Plan caches live in their own files; the context frees them. */
void fpc_conv_plans_free(fp_cudnn *d);
void fpc_mm_plans_free(fp_cudnn *d);

#endif
