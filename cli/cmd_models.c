/* cmd_models.c — `fp16probe models [--image-size N] [--classes N]`: every model of the zoo with its
 * parameter count and forward cost per image (MACs of conv + linear, and FLOPs = 2 x MACs). Read-only. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "error.h"
#include "store_cli.h"
#include "trainer/model.h"

static int parse_int(const char *opt, const char *s, int lo, int *out)
{
    long long v;
    if (cli_integer(s, lo, &v) || v > 1000000)
        return cli_error(2, "models: %s needs an integer >= %d (got '%s')", opt, lo, s);
    *out = (int)v;
    return 0;
}

static void group(char *buf, size_t size, unsigned long long v)   /* 25557032 -> "25,557,032" */
{
    char raw[32];
    int n = snprintf(raw, sizeof raw, "%llu", v), o = 0;
    for (int i = 0; i < n && o + 2 < (int)size; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
}

int cmd_models(int argc, char **argv)
{
    int size = 224, classes = 1000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: fp16probe models [--image-size N] [--classes N]\n"
                   "Lists the models with their parameter count and forward cost per image at the given\n"
                   "input size (default 224) and class count (default 1000).\n");
            return 0;
        }
        const char *val = NULL;
        if ((strcmp(a, "--image-size") == 0 || strcmp(a, "--classes") == 0) && i + 1 < argc)
            val = argv[++i];
        else if (strncmp(a, "--image-size=", 13) == 0)
            val = a + 13;
        else if (strncmp(a, "--classes=", 10) == 0)
            val = a + 10;
        else
            return cli_error(2, "models: unexpected argument '%s' (usage: fp16probe models [--image-size N] "
                                "[--classes N])", a);
        int rc = strncmp(a, "--image-size", 12) == 0 ? parse_int("--image-size", val, 32, &size)
                                                     : parse_int("--classes", val, 1, &classes);
        if (rc)
            return rc;
    }
    printf("models at %dx%d, %d classes; cost per image, forward: GMACs = 1e9 multiply-adds of conv + linear,\n"
           "GFLOPs = 2 x GMACs (torchvision's \"GFLOPS\" column is our GMACs)\n", size, size, classes);
    printf("%-10s %13s %10s %11s %7s\n", "model", "parameters", "GMACs", "GFLOPs", "layers");
    for (const char *const *n = fp_model_names(); *n; n++) {
        fp_model_config cfg = {*n, classes, size, 64, 0, 1};   /* no init: shapes only */
        fp_model *m;
        if (fp_model_create(&m, &cfg))
            return cli_error(1, "models: %s", fp_error_message());
        char params[32];
        group(params, sizeof params, fp_model_num_params(m));
        double macs = fp_model_macs(m);
        printf("%-10s %13s %10.3f %11.3f %7d\n", *n, params, macs / 1e9, 2 * macs / 1e9, fp_model_layer_count(m));
        fp_model_free(m);
    }
    return 0;
}
