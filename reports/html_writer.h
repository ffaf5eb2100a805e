/* html_writer.h — the HTML report's building blocks: escaping of every text and attribute value
 * (& < > " '), and the document skeleton: one inline style sheet whose SHA-256 the document's own
 * Content-Security-Policy names, so the page needs nothing outside itself and runs no script. */
#ifndef FP_REPORTS_HTML_WRITER_H
#define FP_REPORTS_HTML_WRITER_H

#include <stdio.h>

/* Write s with & < > " ' replaced by entities (safe in text and in quoted attributes); invalid
 * UTF-8 bytes and control characters other than tab/newline become U+FFFD. NULL writes nothing. */
void fp_html_text(FILE *f, const char *s);
/* printf, then the result escaped as fp_html_text. */
void fp_html_textf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The policy the document declares: default-src 'none' plus the hash of its style sheet. */
const char *fp_html_csp(void);
/* <!DOCTYPE html> ... <body>, with the title escaped. */
void fp_html_begin(FILE *f, const char *title);
void fp_html_end(FILE *f);

/* Table helpers: <th>/<td> with escaped text; num adds class="n" (right-aligned). */
void fp_html_th(FILE *f, const char *text);
void fp_html_td(FILE *f, const char *text, int num);

#endif
