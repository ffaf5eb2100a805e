/* json_min.c — the strict, minimal JSON parser of json_min.h (objects, arrays, strings, integers).
 * Promises: never reads outside text[0..len), never recurses deeper than FP_JSON_MAX_DEPTH, frees
 * everything on every error path; the whole tree lives in one arena freed by fp_json_free. */
#include "json_min.h"
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---- */
typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} chunk;

struct fp_json_doc {
    chunk *chunks;
    fp_json root;
};

static void *arena_alloc(fp_json_doc *doc, size_t size)
{
    size = (size + 15u) & ~(size_t)15u;
    if (size == 0)
        size = 16;
    chunk *c = doc->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = doc->chunks;
        c->used = 0;
        c->cap = cap;
        doc->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

void fp_json_free(fp_json_doc *doc)
{
    if (!doc)
        return;
    chunk *c = doc->chunks;
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc);
}

const fp_json *fp_json_root(const fp_json_doc *doc)
{
    return doc ? &doc->root : NULL;
}

const char *fp_json_type_name(fp_json_type t)
{
    switch (t) {
    case FP_JSON_OBJECT: return "object";
    case FP_JSON_ARRAY: return "array";
    case FP_JSON_STRING: return "string";
    case FP_JSON_INT: return "integer";
    }
    return "?";
}

const fp_json *fp_json_get(const fp_json *obj, const char *key)
{
    if (!obj || obj->type != FP_JSON_OBJECT)
        return NULL;
    for (size_t k = 0; k < obj->n; k++)
        if (strcmp(obj->keys[k], key) == 0)
            return &obj->items[k];
    return NULL;
}

/* ---- UTF-8 ---- */

size_t fp_utf8_seq_len(const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F; /* no UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (len < n)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return n;
}

int fp_json_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t n = fp_utf8_seq_len(p + i, len - i);
        if (n == 0)
            return 0;
        i += n;
    }
    return 1;
}

/* ---- parser ---- */
typedef struct {
    const unsigned char *s;
    size_t len, pos;
    fp_json_doc *doc;
    char *err;
    size_t errlen;
    int code;             /* first error: FP_EFORMAT or FP_ENOMEM */
    char *scratch;        /* string decoding buffer */
    size_t scratch_cap;
} parser;

__attribute__((format(printf, 3, 4)))
static int perr(parser *p, size_t at, const char *fmt, ...)
{
    if (p->code == FP_OK) {
        p->code = FP_EFORMAT;
        if (p->err && p->errlen) {
            char what[200];
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(what, sizeof what, fmt, ap);
            va_end(ap);
            snprintf(p->err, p->errlen, "%s at byte %zu", what, at);
        }
    }
    return -1;
}

static int pnomem(parser *p)
{
    if (p->code == FP_OK) {
        p->code = FP_ENOMEM;
        if (p->err && p->errlen)
            snprintf(p->err, p->errlen, "out of memory");
    }
    return -1;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

/* A printable description of the byte at pos for messages. */
static const char *describe(const parser *p, char buf[16])
{
    if (p->pos >= p->len)
        return "end of input";
    unsigned char c = p->s[p->pos];
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02x", c);
    return buf;
}

static int scratch_put(parser *p, size_t *n, const void *src, size_t k)
{
    if (*n + k + 1 > p->scratch_cap) {
        size_t cap = p->scratch_cap ? p->scratch_cap : 64;
        while (cap < *n + k + 1)
            cap *= 2;
        char *b = realloc(p->scratch, cap);
        if (!b)
            return pnomem(p);
        p->scratch = b;
        p->scratch_cap = cap;
    }
    memcpy(p->scratch + *n, src, k);
    *n += k;
    return 0;
}

static int hex4(parser *p, size_t at, unsigned *out)
{
    if (p->len - p->pos < 4)
        return perr(p, at, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = p->s[p->pos + (size_t)k];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10u;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10u;
        else
            return perr(p, p->pos + (size_t)k, "bad hex digit in \\u escape");
        v = v * 16 + d;
    }
    p->pos += 4;
    *out = v;
    return 0;
}

/* Parses a string starting at the opening quote; the result is copied into the arena. */
static int parse_string(parser *p, const char **out, size_t *outlen)
{
    size_t start = p->pos;
    p->pos++; /* opening quote */
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len)
            return perr(p, start, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20)
            return perr(p, p->pos, "control character 0x%02x in a string", c);
        if (c == '\\') {
            size_t at = p->pos;
            if (p->pos + 1 >= p->len)
                return perr(p, at, "truncated escape");
            unsigned char e = p->s[p->pos + 1];
            p->pos += 2;
            char ch;
            switch (e) {
            case '"': ch = '"'; break;
            case '\\': ch = '\\'; break;
            case '/': ch = '/'; break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break;
            case 't': ch = '\t'; break;
            case 'u': {
                unsigned cp;
                if (hex4(p, at, &cp))
                    return -1;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
                        return perr(p, at, "unpaired UTF-16 surrogate in \\u escape");
                    p->pos += 2;
                    if (hex4(p, at, &lo))
                        return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return perr(p, at, "unpaired UTF-16 surrogate in \\u escape");
                    cp = 0x10000u + ((cp - 0xD800u) << 10) + (lo - 0xDC00u);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return perr(p, at, "unpaired UTF-16 surrogate in \\u escape");
                if (cp == 0)
                    return perr(p, at, "NUL (\\u0000) in a string");
                unsigned char u[4];
                size_t k;
                if (cp < 0x80) {
                    u[0] = (unsigned char)cp;
                    k = 1;
                } else if (cp < 0x800) {
                    u[0] = (unsigned char)(0xC0 | (cp >> 6));
                    u[1] = (unsigned char)(0x80 | (cp & 0x3F));
                    k = 2;
                } else if (cp < 0x10000) {
                    u[0] = (unsigned char)(0xE0 | (cp >> 12));
                    u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    u[2] = (unsigned char)(0x80 | (cp & 0x3F));
                    k = 3;
                } else {
                    u[0] = (unsigned char)(0xF0 | (cp >> 18));
                    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    u[3] = (unsigned char)(0x80 | (cp & 0x3F));
                    k = 4;
                }
                if (scratch_put(p, &n, u, k))
                    return -1;
                continue;
            }
            default:
                return perr(p, at, "unknown escape '\\%c'", (e >= 0x20 && e < 0x7F) ? e : '?');
            }
            if (scratch_put(p, &n, &ch, 1))
                return -1;
            continue;
        }
        size_t k = fp_utf8_seq_len(p->s + p->pos, p->len - p->pos);
        if (k == 0)
            return perr(p, p->pos, "invalid UTF-8 in a string");
        if (scratch_put(p, &n, p->s + p->pos, k))
            return -1;
        p->pos += k;
    }
    char *dst = arena_alloc(p->doc, n + 1);
    if (!dst)
        return pnomem(p);
    if (n)
        memcpy(dst, p->scratch, n);
    dst[n] = '\0';
    *out = dst;
    *outlen = n;
    return 0;
}

static int parse_int(parser *p, int64_t *out)
{
    size_t start = p->pos;
    int neg = 0;
    if (p->s[p->pos] == '-') {
        neg = 1;
        p->pos++;
    }
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return perr(p, start, "malformed number");
    if (p->s[p->pos] == '0' && p->pos + 1 < p->len && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9')
        return perr(p, start, "number with a leading zero");
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        unsigned d = p->s[p->pos] - '0';
        if (v > (limit - d) / 10)
            return perr(p, start, "integer out of range");
        v = v * 10 + d;
        p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == '.' || p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
        return perr(p, start, "number is not an integer");
    if (neg)
        *out = v == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)v;
    else
        *out = (int64_t)v;
    return 0;
}

static int parse_value(parser *p, fp_json *v, int depth);

/* Grows a temporary vector of (key, value) pairs; keys may be NULL (arrays). */
typedef struct {
    fp_json *vals;
    const char **keys;
    size_t n, cap;
} members;

static int members_push(parser *p, members *m, int with_keys)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        fp_json *v = realloc(m->vals, cap * sizeof *v);
        if (!v)
            return pnomem(p);
        m->vals = v;
        if (with_keys) {
            const char **k = realloc(m->keys, cap * sizeof *k);
            if (!k)
                return pnomem(p);
            m->keys = k;
        }
        m->cap = cap;
    }
    m->n++;
    return 0;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Copies the members into the arena, checking object keys for duplicates. */
static int members_finish(parser *p, members *m, fp_json *v, int with_keys)
{
    v->n = m->n;
    if (m->n == 0)
        return 0;
    fp_json *items = arena_alloc(p->doc, m->n * sizeof *items);
    if (!items)
        return pnomem(p);
    memcpy(items, m->vals, m->n * sizeof *items);
    v->items = items;
    if (with_keys) {
        const char **keys = arena_alloc(p->doc, m->n * sizeof *keys);
        if (!keys)
            return pnomem(p);
        memcpy(keys, m->keys, m->n * sizeof *keys);
        v->keys = keys;
        if (m->n > 1) {
            const char **sorted = malloc(m->n * sizeof *sorted);
            if (!sorted)
                return pnomem(p);
            memcpy(sorted, m->keys, m->n * sizeof *sorted);
            qsort(sorted, m->n, sizeof *sorted, cmp_key);
            for (size_t k = 1; k < m->n; k++)
                if (strcmp(sorted[k - 1], sorted[k]) == 0) {
                    perr(p, v->offset, "duplicate key \"%.120s\" in the object", sorted[k]);
                    free(sorted);
                    return -1;
                }
            free(sorted);
        }
    }
    return 0;
}

static int parse_container(parser *p, fp_json *v, int depth, int is_object)
{
    char buf[16];
    unsigned char close = is_object ? '}' : ']';
    if (depth >= FP_JSON_MAX_DEPTH)
        return perr(p, p->pos, "nesting deeper than %d", FP_JSON_MAX_DEPTH);
    v->type = is_object ? FP_JSON_OBJECT : FP_JSON_ARRAY;
    p->pos++;
    members m = { 0 };
    int rc = -1;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        rc = members_finish(p, &m, v, is_object);
        goto out;
    }
    for (;;) {
        skip_ws(p);
        if (members_push(p, &m, is_object))
            goto out;
        if (is_object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                perr(p, p->pos, "expected a string key, found %s", describe(p, buf));
                goto out;
            }
            size_t klen;
            if (parse_string(p, &m.keys[m.n - 1], &klen))
                goto out;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                perr(p, p->pos, "expected ':' after an object key, found %s", describe(p, buf));
                goto out;
            }
            p->pos++;
            skip_ws(p);
        }
        if (parse_value(p, &m.vals[m.n - 1], depth + 1))
            goto out;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        perr(p, p->pos, "expected ',' or '%c', found %s", close, describe(p, buf));
        goto out;
    }
    rc = members_finish(p, &m, v, is_object);
out:
    free(m.vals);
    free(m.keys);
    return rc;
}

static int parse_value(parser *p, fp_json *v, int depth)
{
    char buf[16];
    memset(v, 0, sizeof *v);
    v->offset = p->pos;
    if (p->pos >= p->len)
        return perr(p, p->pos, "expected a value, found end of input");
    unsigned char c = p->s[p->pos];
    if (c == '{' || c == '[')
        return parse_container(p, v, depth, c == '{');
    if (c == '"') {
        v->type = FP_JSON_STRING;
        return parse_string(p, &v->str, &v->n);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        v->type = FP_JSON_INT;
        return parse_int(p, &v->i);
    }
    if (c == 't' || c == 'f' || c == 'n')
        return perr(p, p->pos, "true/false/null are not accepted here");
    return perr(p, p->pos, "expected a value, found %s", describe(p, buf));
}

int fp_json_parse(fp_json_doc **out, const char *text, size_t len, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    *out = NULL;
    if (!text && len)
        return FP_EINVAL;
    fp_json_doc *doc = calloc(1, sizeof *doc);
    if (!doc) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return FP_ENOMEM;
    }
    parser p = { .s = (const unsigned char *)text, .len = len, .doc = doc, .err = err, .errlen = errlen,
                 .code = FP_OK };
    char buf[16];
    skip_ws(&p);
    if (parse_value(&p, &doc->root, 0) == 0) {
        skip_ws(&p);
        if (p.pos != p.len)
            perr(&p, p.pos, "unexpected %s after the JSON value", describe(&p, buf));
    }
    free(p.scratch);
    if (p.code != FP_OK) {
        fp_json_free(doc);
        return p.code;
    }
    *out = doc;
    return FP_OK;
}

/* ---- writing JSON strings ---- */

void fp_json_escape(fp_json_sink put, void *ctx, const char *s)
{
    put(ctx, "\"", 1);
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        const unsigned char *run = p;   /* bytes copied as they are */
        while (*p >= 0x20 && *p < 0x7F && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            put(ctx, (const char *)run, (size_t)(p - run));
        unsigned char c = *p;
        if (!c)
            break;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(ctx, esc, 2);
            p++;
        } else if (c < 0x20 || c == 0x7F) {
            switch (c) {
            case '\n': put(ctx, "\\n", 2); break;
            case '\r': put(ctx, "\\r", 2); break;
            case '\t': put(ctx, "\\t", 2); break;
            default:
                snprintf(esc, sizeof esc, "\\u%04x", c);
                put(ctx, esc, 6);
            }
            p++;
        } else {   /* a well-formed UTF-8 sequence is copied, anything else is U+FFFD */
            size_t n = fp_utf8_seq_len(p, 4);
            if (n) {
                put(ctx, (const char *)p, n);
                p += n;
            } else {
                put(ctx, "\\ufffd", 6);
                p++;
            }
        }
    }
    put(ctx, "\"", 1);
}

static void file_sink(void *f, const char *bytes, size_t n)
{
    fwrite(bytes, 1, n, f);
}

void fp_json_string(FILE *f, const char *s)
{
    fp_json_escape(file_sink, f, s);
}
