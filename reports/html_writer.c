/* html_writer.c — escaping and the document skeleton of the HTML report (html_writer.h). Promise:
 * no byte from the database reaches the document unescaped; the page loads no external resource and
 * carries no script; its CSP allows exactly its one style sheet (by hash). */
#include "html_writer.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "json_min.h"
#include "sha256.h"

/* The whole style sheet; charts do not depend on it (SVG presentation attributes carry their colours),
 * so the report stays readable where a stricter policy drops it. Long unbroken text (a configuration
 * JSON, a kernel name, an event) wraps anywhere rather than widening the page. */
static const char style_sheet[] =
    "body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1200px;"
    "padding:0 16px 48px;color:#1b1f24;background:#fff}"
    "h1{font-size:22px;margin:20px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;"
    "padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}"
    "table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}"
    "th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}"
    "th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}#layer-table td.n{white-space:nowrap}"
    ".verdict{font-size:16px;background:#f6f8fa;border-left:4px solid #0969da;padding:8px 12px}"
    ".muted{color:#57606a}.bad{color:#cf222e}.good{color:#1a7f37}"
    "figure{margin:10px 0 18px}figcaption{font-size:12px;color:#57606a}"
    "pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}"
    "table.env{table-layout:fixed;width:100%}table.env th{width:11em}"
    "table.env td,#events-table td:last-child,table.kernels td:last-child{overflow-wrap:anywhere}"
    ".scroll{overflow-x:auto;max-width:100%}"
    "details.detail{margin:8px 0 14px}details.detail>summary{cursor:pointer;font-weight:600;padding:4px 0}"
    "nav a{margin-right:12px}svg{max-width:100%;height:auto}";

const char *fp_html_csp(void)
{
    static char csp[160];
    if (!csp[0]) {
        uint8_t d[32];
        char b64[48];
        fp_sha256(style_sheet, strlen(style_sheet), d);
        fp_base64(d, 32, b64);
        snprintf(csp, sizeof csp, "default-src 'none'; style-src 'sha256-%s'; base-uri 'none'; form-action 'none'",
                 b64);
    }
    return csp;
}

void fp_html_text(FILE *f, const char *s)
{
    if (!s)
        return;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        switch (*p) {
        case '&': fputs("&amp;", f); p++; continue;
        case '<': fputs("&lt;", f); p++; continue;
        case '>': fputs("&gt;", f); p++; continue;
        case '"': fputs("&quot;", f); p++; continue;
        case '\'': fputs("&#39;", f); p++; continue;
        default: break;
        }
        if (*p < 0x20 && *p != '\n' && *p != '\t') {
            fputs("\xEF\xBF\xBD", f);
            p++;
            continue;
        }
        size_t n = fp_utf8_seq_len(p, 4);
        if (n == 0) {
            fputs("\xEF\xBF\xBD", f);
            p++;
            continue;
        }
        if (n == 1 && *p == 0x7F) {
            fputs("\xEF\xBF\xBD", f);
            p++;
            continue;
        }
        fwrite(p, 1, n, f);
        p += n;
    }
}

void fp_html_textf(FILE *f, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fp_html_text(f, buf);
}

void fp_html_begin(FILE *f, const char *title)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"", f);
    fp_html_text(f, fp_html_csp());
    fputs("\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"fp16probe report\">\n<title>", f);
    fp_html_text(f, title);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n", style_sheet);
}

void fp_html_end(FILE *f)
{
    fputs("</body>\n</html>\n", f);
}

void fp_html_th(FILE *f, const char *text)
{
    fputs("<th>", f);
    fp_html_text(f, text);
    fputs("</th>", f);
}

void fp_html_td(FILE *f, const char *text, int num)
{
    fputs(num ? "<td class=\"n\">" : "<td>", f);
    fp_html_text(f, text);
    fputs("</td>", f);
}
