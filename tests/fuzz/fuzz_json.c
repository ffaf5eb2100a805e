/* fuzz_json.c — lib/json_min.c's parser on arbitrary bytes (a safetensors header is the outside input
 * it reads). Beyond "no crash, no leak, no undefined behaviour", checks what json_min.h promises of a
 * parsed document: keys are unique and found by fp_json_get, strings are well-formed UTF-8 without NUL
 * and n bytes long, depth stays within FP_JSON_MAX_DEPTH; and that fp_json_escape of every decoded string
 * parses back to the same string. A failed parse leaves *out NULL and a NUL-terminated message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "json_min.h"
#include "fuzz.h"

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void put(void *ctx, const char *bytes, size_t n)
{
    sbuf *b = ctx;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np)
            abort();
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, bytes, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void check_string(const fp_json *v)
{
    FZ_CHECK(v->str != NULL);
    FZ_CHECK(strlen(v->str) == v->n);
    FZ_CHECK(fp_json_utf8_valid(v->str, v->n));
    sbuf b = {0};
    fp_json_escape(put, &b, v->str);
    fp_json_doc *doc = NULL;
    char err[128];
    FZ_CHECK(fp_json_parse(&doc, b.p, b.n, err, sizeof err) == FP_OK);
    const fp_json *r = fp_json_root(doc);
    FZ_CHECK(r->type == FP_JSON_STRING && r->n == v->n && memcmp(r->str, v->str, v->n) == 0);
    fp_json_free(doc);
    free(b.p);
}

static void walk(const fp_json *v, int depth)
{
    FZ_CHECK(depth <= FP_JSON_MAX_DEPTH);
    (void)fp_json_type_name(v->type);
    switch (v->type) {
    case FP_JSON_OBJECT:
        for (size_t i = 0; i < v->n; i++) {
            FZ_CHECK(fp_json_utf8_valid(v->keys[i], strlen(v->keys[i])));
            FZ_CHECK(fp_json_get(v, v->keys[i]) == &v->items[i]);   /* unique keys */
            walk(&v->items[i], depth + 1);
        }
        FZ_CHECK(fp_json_get(v, "\xff") == NULL);
        break;
    case FP_JSON_ARRAY:
        for (size_t i = 0; i < v->n; i++)
            walk(&v->items[i], depth + 1);
        FZ_CHECK(fp_json_get(v, "") == NULL);
        break;
    case FP_JSON_STRING:
        check_string(v);
        break;
    case FP_JSON_INT:
        break;
    default:
        FZ_CHECK(!"unknown type");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the UTF-8 helpers on the raw bytes: a valid sequence is 1..4 bytes and within the input */
    for (size_t i = 0; i < size;) {
        size_t k = fp_utf8_seq_len(data + i, size - i);
        FZ_CHECK(k <= 4 && k <= size - i);
        i += k ? k : 1;
    }
    (void)fp_json_utf8_valid((const char *)data, size);

    fp_json_doc *doc = (fp_json_doc *)1;
    char err[64];
    int rc = fp_json_parse(&doc, (const char *)data, size, err, sizeof err);
    if (rc == FP_OK) {
        FZ_CHECK(doc != NULL);
        walk(fp_json_root(doc), 1);
        fp_json_free(doc);
    } else {
        if (getenv("FUZZ_DEBUG"))
            fprintf(stderr, "parse: %s\n", err);
        FZ_CHECK(doc == NULL);
        FZ_CHECK(rc == FP_EFORMAT || rc == FP_ENOMEM);
        FZ_CHECK(memchr(err, '\0', sizeof err) != NULL);
    }
    /* a tiny message buffer: cut, still terminated */
    char tiny[4];
    rc = fp_json_parse(&doc, (const char *)data, size, tiny, sizeof tiny);
    if (rc == FP_OK)
        fp_json_free(doc);
    else
        FZ_CHECK(memchr(tiny, '\0', sizeof tiny) != NULL);
    return 0;
}
