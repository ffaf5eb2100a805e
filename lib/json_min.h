/* json_min.h — a minimal, strict JSON parser: just enough for safetensors headers, and the one JSON
 * string escaper every writer uses. The parser accepts objects, arrays, strings (every escape, \u
 * surrogate pairs, UTF-8 checked) and integers that fit int64; rejects everything else (fractions,
 * exponents, true/false/null, duplicate keys, NUL in strings, nesting deeper than FP_JSON_MAX_DEPTH,
 * trailing garbage) with a message. The escaper always writes a valid JSON string literal. */
#ifndef FP_JSON_MIN_H
#define FP_JSON_MIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FP_JSON_MAX_DEPTH 32

typedef enum { FP_JSON_OBJECT, FP_JSON_ARRAY, FP_JSON_STRING, FP_JSON_INT } fp_json_type;

typedef struct fp_json fp_json;
struct fp_json {
    fp_json_type type;
    size_t n;              /* members (object), elements (array) or bytes (string, without the NUL) */
    size_t offset;         /* byte offset of the value in the parsed text (for messages) */
    const char *const *keys; /* object: n NUL-terminated keys, in document order */
    const fp_json *items;  /* object: n values matching keys; array: n elements */
    const char *str;       /* string: decoded UTF-8, NUL-terminated (never contains NUL) */
    int64_t i;             /* integer */
};

typedef struct fp_json_doc fp_json_doc;

/* Parse text[0..len). On success *out holds the document (free with fp_json_free) and FP_OK is
 * returned. On failure returns FP_EFORMAT (or FP_ENOMEM), *out is NULL, and err (when non-NULL)
 * receives a short message such as "at byte 17: expected ':' after an object key". Whitespace
 * (space, tab, CR, LF) around the single top-level value is allowed; nothing else may follow it. */
int fp_json_parse(fp_json_doc **out, const char *text, size_t len, char *err, size_t errlen);
const fp_json *fp_json_root(const fp_json_doc *doc);
void fp_json_free(fp_json_doc *doc);

/* The value of key in an object, or NULL (also NULL when obj is not an object). */
const fp_json *fp_json_get(const fp_json *obj, const char *key);

/* Length (1..4) of the well-formed UTF-8 sequence at s, reading at most len bytes, or 0 when it is
 * ill-formed. In a NUL-terminated string len may be 4: the NUL is no continuation byte. */
size_t fp_utf8_seq_len(const unsigned char *s, size_t len);

/* 1 when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int fp_json_utf8_valid(const char *s, size_t len);

/* A name for a type: "object", "array", "string", "integer". */
const char *fp_json_type_name(fp_json_type t);


/* ---- writing JSON strings ---- */

/* Where fp_json_escape puts its output: append bytes[0..n) (not NUL-terminated) to ctx. */
typedef void (*fp_json_sink)(void *ctx, const char *bytes, size_t n);

/* s as a JSON string literal, quotes included, through put(ctx, ...): '"' and '\\' backslashed;
 * \n \r \t as such; every other control character and DEL as \u00xx; well-formed UTF-8 copied;
 * each byte of ill-formed UTF-8 as \ufffd. NULL is written as "" (write null yourself if you want it). */
void fp_json_escape(fp_json_sink put, void *ctx, const char *s);

/* fp_json_escape onto a stdio stream. */
void fp_json_string(FILE *f, const char *s);

#endif
