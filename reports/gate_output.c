/* gate_output.c — the gate's results for people and CI systems (gate.h): an aligned text table,
 * JUnit XML (one testcase per check: FAIL -> <failure>, INCONCLUSIVE and SKIP -> <skipped>), and a
 * Markdown summary. Promise: every text from a database is escaped for its format. */
#include <math.h>
#include <string.h>
#include "gate.h"
#include "json_min.h"

static const char *verdict(const fp_gate_result_t *res)
{
    int code = fp_gate_exit_code(res);
    return code == 1 ? "REGRESSION" : code == 2 ? "INCONCLUSIVE" : "PASS";
}

static void counts(const fp_gate_result_t *res, size_t n[4])
{
    memset(n, 0, 4 * sizeof *n);
    for (size_t i = 0; i < res->n; i++)
        n[res->checks[i].status]++;
}

/* Text for a terminal: control characters from the database shown as '?'. */
static void plain(FILE *f, const char *s, int width)
{
    int w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, w++)
        fputc(*p < 0x20 || *p == 0x7F ? '?' : *p, f);
    for (; w < width; w++)
        fputc(' ', f);
}

void fp_gate_print_table(FILE *f, const fp_gate_result_t *res)
{
    int wn = 5;
    for (size_t i = 0; i < res->n; i++) {
        int l = (int)strlen(res->checks[i].name);
        wn = l > wn ? l : wn;
    }
    fprintf(f, "candidate: ");
    plain(f, res->candidate, 0);
    fprintf(f, "\nbaseline:  ");
    plain(f, res->baseline[0] ? res->baseline : "(none: threshold checks only)", 0);
    fprintf(f, "\n\n%-*s  %-12s  %s\n", wn, "check", "result", "figures");
    for (size_t i = 0; i < res->n; i++) {
        const fp_check_t *c = &res->checks[i];
        plain(f, c->name, wn);
        fprintf(f, "  %-12s  ", fp_check_status_name(c->status));
        plain(f, c->figures, 0);
        fputc('\n', f);
    }
    size_t n[4];
    counts(res, n);
    fprintf(f, "\ngate: %s (%zu passed, %zu failed, %zu inconclusive, %zu skipped)\n", verdict(res), n[FP_CHECK_PASS],
            n[FP_CHECK_FAIL], n[FP_CHECK_INCONCLUSIVE], n[FP_CHECK_SKIP]);
}

void fp_xml_text(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned char c = *p;
        const char *ent = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&quot;"
                        : c == '\'' ? "&apos;" : NULL;
        if (ent) {
            fputs(ent, f);
            p++;
        } else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            p++;   /* not allowed in XML 1.0 */
        } else if (c < 0x80) {
            fputc(c, f);
            p++;
        } else {
            size_t n = fp_utf8_seq_len(p, 4);
            if (n) {
                fwrite(p, 1, n, f);
                p += n;
            } else {
                fputs("\xEF\xBF\xBD", f);
                p++;
            }
        }
    }
}

void fp_gate_junit(FILE *f, const fp_gate_result_t *res)
{
    size_t n[4];
    counts(res, n);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<testsuites name=\"fp16probe gate\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\">\n"
               "  <testsuite name=\"fp16probe.gate\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\">\n"
               "    <properties>\n      <property name=\"candidate\" value=\"",
            res->n, n[FP_CHECK_FAIL], n[FP_CHECK_INCONCLUSIVE] + n[FP_CHECK_SKIP], res->n, n[FP_CHECK_FAIL],
            n[FP_CHECK_INCONCLUSIVE] + n[FP_CHECK_SKIP]);
    fp_xml_text(f, res->candidate);
    fputs("\"/>\n      <property name=\"baseline\" value=\"", f);
    fp_xml_text(f, res->baseline);
    fprintf(f, "\"/>\n      <property name=\"verdict\" value=\"%s\"/>\n    </properties>\n", verdict(res));
    for (size_t i = 0; i < res->n; i++) {
        const fp_check_t *c = &res->checks[i];
        fputs("    <testcase classname=\"fp16probe.gate\" name=\"", f);
        fp_xml_text(f, c->name);
        fputs("\" time=\"0\">\n", f);
        if (c->status == FP_CHECK_FAIL) {
            fputs("      <failure type=\"regression\" message=\"", f);
            fp_xml_text(f, c->figures);
            fputs("\">", f);
            fp_xml_text(f, c->figures);
            fputs("</failure>\n", f);
        } else if (c->status == FP_CHECK_INCONCLUSIVE || c->status == FP_CHECK_SKIP) {
            fprintf(f, "      <skipped message=\"%s: ", c->status == FP_CHECK_SKIP ? "skipped" : "inconclusive");
            fp_xml_text(f, c->figures);
            fputs("\"/>\n", f);
        }
        fputs("      <system-out>", f);
        fp_xml_text(f, c->figures);
        fputs("</system-out>\n    </testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
}

/* Markdown table cell: | and newlines escaped, HTML-significant characters as entities. */
static void md_cell(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '|': fputs("\\|", f); break;
        case '\n': case '\r': fputc(' ', f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '`': fputs("\\`", f); break;
        case '*': case '_': case '[': case ']': case '\\': fputc('\\', f); fputc(*p, f); break;
        default:
            if (*p >= 0x20 && *p != 0x7F)
                fputc(*p, f);
        }
    }
}

void fp_gate_markdown(FILE *f, const fp_gate_result_t *res)
{
    size_t n[4];
    counts(res, n);
    static const char *const icon[] = {"pass", "**FAIL**", "*inconclusive*", "skip"};
    fprintf(f, "### fp16probe gate: %s\n\n%zu passed, %zu failed, %zu inconclusive, %zu skipped.\n\n", verdict(res),
            n[FP_CHECK_PASS], n[FP_CHECK_FAIL], n[FP_CHECK_INCONCLUSIVE], n[FP_CHECK_SKIP]);
    fputs("Candidate: ", f);
    md_cell(f, res->candidate);
    fputs("  \nBaseline: ", f);
    md_cell(f, res->baseline[0] ? res->baseline : "none (threshold checks only)");
    fputs("\n\n| check | result | figures |\n|---|---|---|\n", f);
    for (size_t i = 0; i < res->n; i++) {
        fputs("| ", f);
        md_cell(f, res->checks[i].name);
        fprintf(f, " | %s | ", icon[res->checks[i].status]);
        md_cell(f, res->checks[i].figures);
        fputs(" |\n", f);
    }
    fputs("\n", f);
}
