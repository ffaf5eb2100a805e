/* make_seeds.c — writes the generated part of the fuzz corpus (tests/fuzz/make-seeds runs it):
 *   OUT/checkpoint/   checkpoints of the two tinyarm.h arms after one step (what --resume reads)
 *   OUT/safetensors/  small files of every dtype, a scalar, an empty tensor, metadata
 *   OUT/cifar10/      one and three whole records, file selections (fuzz_cifar10.c's byte 0)
 *   OUT/store_reader.base.sqlite and OUT/store_reader/  the base database (store_testutil's fixture: one
 *                     session, two runs of 3 steps x 2 layers; the second trained on 2 ranks: dist_steps
 *                     and allreduce_error rows) and patch lists aimed at its pages
 *   OUT/image/        tiny PNGs (gray 1/8/16-bit, gray + alpha, RGB 8/16-bit, palette, RGBA, interlaced)
 *                     and JPEGs (baseline 4:2:0 and 4:4:4, progressive, gray, CMYK, restart markers)
 * Deterministic except the database's timestamps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include <png.h>
#include "error.h"
#include "safetensors.h"
#include "store_testutil.h"
#include "trainer/run/checkpoint.h"
#include "fuzz.h"
#include "tinyarm.h"

static const char *out;

static void die(const char *what)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, fp_error_message());
    exit(1);
}

static void put(const char *sub, const char *name, const void *data, size_t n)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", out, sub);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/%s/%s", out, sub, name);
    if (fz_write(p, data, n) != 0)
        die(p);
}

static void checkpoints(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/checkpoint", out);
    mkdir(dir, 0777);
    fp_data_opts o;
    fp_data_opts_default(&o);
    fp_dataset *ds;
    if (fp_dataset_open(&ds, "synthetic:20", &o))
        die("synthetic data");
    for (size_t i = 0; i < FZ_TINY_NARMS; i++) {
        fp_arm_config c;
        fz_tiny_config(&c, i);
        fp_arm *a;
        if (fp_arm_create(&a, &c))
            die("arm");
        fp_loader_opts lo;
        fp_loader_opts_default(&lo);
        lo.batch = 4;
        lo.threads = 0;
        fp_loader *ld;
        fp_batch b;
        fp_arm_step_result r;
        if (fp_loader_start(&ld, ds, &lo) || fp_loader_next(ld, &b) != FP_OK)
            die("loader");
        for (int k = 0; k < b.n; k++)   /* tinyarm's 3 classes */
            b.labels[k] %= 3;
        if (fp_arm_step(a, &b, &r))
            die("step");
        int64_t ep, bi;
        fp_loader_position(ld, &ep, &bi);
        fp_loader_stop(ld);
        fp_checkpoint_settings s;
        fp_checkpoint_settings_fill(&s, &c, "synthetic:100", 8, 1, 1, "{\"lr\":0.1}");
        fp_checkpoint_state st = {.data_epoch = ep, .data_batch = bi, .config_json = "{\"steps\":2}",
                                  .extra = s.kv, .n_extra = FP_CHECKPOINT_NSETTINGS};
        char p[4096];
        snprintf(p, sizeof p, "%s/ck_%s_%s.safetensors", dir, fz_tiny_arms[i].policy,
                 fp_optim_name(fz_tiny_arms[i].kind));
        if (fp_checkpoint_save(p, a, &st))
            die(p);
        fp_arm_free(a);
    }
    fp_dataset_close(ds);
}

static void safetensors(void)
{
    char dir[4096], p[4200];
    snprintf(dir, sizeof dir, "%s/safetensors", out);
    mkdir(dir, 0777);
    static const uint8_t bytes[64] = {0, 1, 2, 3, 0x3c, 0x00, 0x7c, 0x00, 0xff, 0x7f, 0x80, 0x3f, 0, 0, 0xc0, 0x7f,
                                      9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0xff, 0xfe, 0x80, 0x00, 0x01, 0x7e};
    /* every dtype, shape [2, 2] (a 1-byte dtype: [4]) */
    fp_st_writer *w;
    if (fp_st_writer_new(&w))
        die("writer");
    for (int dt = 0; dt < FP_ST_DTYPE_COUNT; dt++) {
        int64_t shape[2] = {2, 2};
        char name[64];
        snprintf(name, sizeof name, "t.%s", fp_st_dtype_name((fp_st_dtype)dt));
        if (fp_st_writer_add(w, name, (fp_st_dtype)dt, shape, 2, bytes))
            die(name);
    }
    fp_st_writer_metadata(w, "format", "pt");
    snprintf(p, sizeof p, "%s/all_dtypes.safetensors", dir);
    if (fp_st_writer_write(w, p))
        die(p);
    fp_st_writer_free(w);
    /* a scalar, an empty tensor, a rank-8 tensor, metadata */
    if (fp_st_writer_new(&w))
        die("writer");
    int64_t none[1] = {0}, r8[8] = {1, 1, 1, 1, 1, 1, 2, 1};
    fp_st_writer_add(w, "scalar", FP_ST_F32, NULL, 0, bytes);
    fp_st_writer_add(w, "empty", FP_ST_F16, none, 1, bytes);
    fp_st_writer_add(w, "deep", FP_ST_BF16, r8, 8, bytes);
    fp_st_writer_metadata(w, "format", "fp16probe-checkpoint");
    fp_st_writer_metadata(w, "version", "1");
    fp_st_writer_metadata(w, "note", "\xc3\xa9t\xc3\xa9 \"quoted\" \\ \n");
    snprintf(p, sizeof p, "%s/shapes_meta.safetensors", dir);
    if (fp_st_writer_write(w, p))
        die(p);
    fp_st_writer_free(w);
    /* nothing but metadata */
    if (fp_st_writer_new(&w))
        die("writer");
    fp_st_writer_metadata(w, "k", "v");
    snprintf(p, sizeof p, "%s/meta_only.safetensors", dir);
    if (fp_st_writer_write(w, p))
        die(p);
    fp_st_writer_free(w);
}

static void cifar(void)
{
    static uint8_t recs[1 + 3 * 3073];
    for (size_t i = 1; i < sizeof recs; i++)
        recs[i] = (uint8_t)(i * 37 + i / 1024);
    for (int r = 0; r < 3; r++)
        recs[1 + (size_t)r * 3073] = (uint8_t)(r * 4);   /* labels 0, 4, 8 */
    recs[0] = 0x01;   /* data_batch_1 only, no augmentation, 32x32 */
    put("cifar10", "one_record", recs, 1 + 3073);
    recs[0] = 0x21 | 0x40;   /* data_batch_1 + test_batch, augmented */
    put("cifar10", "three_records_val_augment", recs, sizeof recs);
    recs[0] = 0x1f | 0x80;   /* all five training files, resized to 40 */
    put("cifar10", "five_files_resize", recs, sizeof recs);
    recs[0] = 0x01;
    recs[1 + 3073] = 10;     /* a label out of range in record 1 */
    put("cifar10", "bad_label", recs, sizeof recs);
    put("cifar10", "truncated", recs, 1 + 3073 + 100);
}

static void store(void)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/store_reader.base.sqlite", out);
    remove(p);
    int64_t runs[2];
    if (tu_write_fixture(p, 3, 2, runs))
        die(p);
    /* the data-parallel tables: run 2 on 2 ranks, every step, its fp16 all-reduce checked at step 2 */
    fp_store_t *s;
    if (fp_store_open(&s, p))
        die(p);
    int rc = FP_OK;
    for (int64_t step = 1; step <= 3 && !rc; step++) {
        fp_dist_step_rec_t d[2];
        for (int k = 0; k < 2; k++)
            d[k] = (fp_dist_step_rec_t){.run = runs[1], .step = step, .rank = k, .wall_ns = 2000000 + 500000 * k,
                                        .comm_ns = 400000, .exposed_ns = 300000, .bytes = 22350000};
        rc = fp_store_dist_steps(s, d, 2);
    }
    fp_allreduce_error_rec_t e[3] = {
        {.run = runs[1], .step = 2, .layer = -1, .wire = "fp16", .rel_l2 = 3e-4, .overflow = 0, .underflow = 12},
        {.run = runs[1], .step = 2, .layer = 0, .wire = "fp16", .rel_l2 = 2e-4, .overflow = -1, .underflow = -1},
        {.run = runs[1], .step = 2, .layer = 1, .wire = "fp16", .rel_l2 = 4e-4, .overflow = -1, .underflow = -1}};
    rc = rc ? rc : fp_store_allreduce_error(s, e, 3);
    int crc = fp_store_close(s, FP_RUN_FINISHED, NULL);
    if (rc || crc)
        die(p);
    /* patch lists (fuzz_store_reader.c): flags, then {offset u32 LE, length, bytes} */
    static const uint8_t none[] = {0};
    put("store_reader", "no_patch", none, sizeof none);
    static const uint8_t pagesize[] = {0, 16, 0, 0, 0, 2, 0x02, 0x00};          /* page size 512 */
    put("store_reader", "header_page_size", pagesize, sizeof pagesize);
    static const uint8_t version[] = {0, 96, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}; /* SQLite version */
    put("store_reader", "header_version", version, sizeof version);
    static const uint8_t cut[] = {1, 0x00, 0x30, 0, 0};                          /* cut at 12 KiB */
    put("store_reader", "truncated", cut, sizeof cut);
    static const uint8_t page2[] = {0, 0x00, 0x10, 0, 0, 8, 0x0d, 0, 0, 0, 0x7f, 0xff, 0x00, 0x00};
    put("store_reader", "page2_header", page2, sizeof page2);
    static const uint8_t schema[] = {0, 0x00, 0x0e, 0, 0, 4, 'X', 'X', 'X', 'X'};   /* inside page 1's schema */
    put("store_reader", "schema_bytes", schema, sizeof schema);
}

/* ---- images ---- */

static uint8_t pixel(int x, int y, int c)
{
    return (uint8_t)(x * 40 + y * 25 + c * 70);
}

static void png(const char *name, int w, int h, int color_type, int depth, int interlace)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/image/%s", out, name);
    FILE *f = fopen(p, "wb");
    png_structp ps = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop pi = ps ? png_create_info_struct(ps) : NULL;
    if (!f || !pi || setjmp(png_jmpbuf(ps)))
        die(p);
    png_init_io(ps, f);
    png_set_IHDR(ps, pi, (png_uint_32)w, (png_uint_32)h, depth, color_type, interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[4] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {9, 9, 9}};
        png_set_PLTE(ps, pi, pal, 4);
        png_byte trans[1] = {128};
        png_set_tRNS(ps, pi, trans, 1, NULL);
    }
    png_write_info(ps, pi);
    int channels = color_type == PNG_COLOR_TYPE_RGB ? 3 : color_type == PNG_COLOR_TYPE_RGBA ? 4
                   : color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2 : 1;
    size_t rowbytes = ((size_t)w * channels * depth + 7) / 8;
    uint8_t *row = calloc(rowbytes, 1);
    int passes = png_set_interlace_handling(ps);
    for (int pass = 0; pass < passes; pass++)
        for (int y = 0; y < h; y++) {
            memset(row, 0, rowbytes);
            for (int x = 0; x < w; x++)
                for (int c = 0; c < channels; c++) {
                    size_t bit = ((size_t)x * channels + c) * depth;
                    uint8_t v = pixel(x, y, c);
                    if (depth == 16) {
                        row[bit / 8] = v;
                        row[bit / 8 + 1] = (uint8_t)(v ^ 0x5a);
                    } else if (depth == 8) {
                        row[bit / 8] = v;
                    } else {   /* 1, 2 or 4 bits, first pixel in the high bits */
                        unsigned mask = (1u << depth) - 1, val = (v >> (8 - depth)) & mask;
                        if (color_type == PNG_COLOR_TYPE_PALETTE)
                            val = (unsigned)(x + y) % 4 & mask;
                        row[bit / 8] |= (uint8_t)(val << (8 - depth - bit % 8));
                    }
                }
            png_write_row(ps, row);
        }
    png_write_end(ps, NULL);
    png_destroy_write_struct(&ps, &pi);
    free(row);
    fclose(f);
}

static void jpeg(const char *name, int w, int h, J_COLOR_SPACE cs, int comps, int sub420, int progressive,
                 int restart)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/image/%s", out, name);
    FILE *f = fopen(p, "wb");
    if (!f)
        die(p);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = cs;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 85, TRUE);
    if (comps == 3) {
        c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = sub420 ? 2 : 1;
    }
    if (cs == JCS_CMYK) {
        jpeg_set_colorspace(&c, JCS_YCCK);
        c.write_Adobe_marker = TRUE;
    }
    if (progressive)
        jpeg_simple_progression(&c);
    c.restart_interval = (unsigned)restart;
    jpeg_start_compress(&c, TRUE);
    uint8_t *row = malloc((size_t)w * comps);
    while (c.next_scanline < c.image_height) {
        for (int x = 0; x < w; x++)
            for (int k = 0; k < comps; k++)
                row[x * comps + k] = pixel(x, (int)c.next_scanline, k);
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    fclose(f);
}

static void images(void)
{
    char d[4096];
    snprintf(d, sizeof d, "%s/image", out);
    mkdir(d, 0777);
    png("gray1.png", 5, 3, PNG_COLOR_TYPE_GRAY, 1, PNG_INTERLACE_NONE);
    png("gray8.png", 4, 4, PNG_COLOR_TYPE_GRAY, 8, PNG_INTERLACE_NONE);
    png("gray16.png", 3, 2, PNG_COLOR_TYPE_GRAY, 16, PNG_INTERLACE_NONE);
    png("gray_alpha.png", 3, 3, PNG_COLOR_TYPE_GRAY_ALPHA, 8, PNG_INTERLACE_NONE);
    png("rgb8.png", 5, 3, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_NONE);
    png("rgb16.png", 2, 3, PNG_COLOR_TYPE_RGB, 16, PNG_INTERLACE_NONE);
    png("palette2.png", 6, 2, PNG_COLOR_TYPE_PALETTE, 2, PNG_INTERLACE_NONE);
    png("rgba.png", 4, 3, PNG_COLOR_TYPE_RGBA, 8, PNG_INTERLACE_NONE);
    png("interlaced.png", 9, 9, PNG_COLOR_TYPE_RGB, 8, PNG_INTERLACE_ADAM7);
    jpeg("baseline420.jpg", 8, 8, JCS_RGB, 3, 1, 0, 0);
    jpeg("baseline444.jpg", 7, 5, JCS_RGB, 3, 0, 0, 0);
    jpeg("progressive.jpg", 9, 7, JCS_RGB, 3, 1, 1, 0);
    jpeg("gray.jpg", 4, 4, JCS_GRAYSCALE, 1, 0, 0, 0);
    jpeg("cmyk.jpg", 4, 4, JCS_CMYK, 4, 0, 0, 0);
    jpeg("restart.jpg", 17, 9, JCS_RGB, 3, 1, 0, 1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds OUTDIR\n");
        return 2;
    }
    out = argv[1];
    mkdir(out, 0777);
    checkpoints();
    safetensors();
    cifar();
    store();
    images();
    return 0;
}
