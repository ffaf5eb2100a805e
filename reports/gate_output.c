/* gate_output.c — the gate's results for people and CI systems (gate.h): an aligned text table, JUnit
 * XML, a Markdown summary, JSON (with the sides' ranks) and GitHub workflow annotations. Promises: every
 * output gives every check the same verdict, and the one the exit status gives — an inconclusive check
 * counts as a pass or as a failure everywhere, as --inconclusive says; every text from a database is
 * escaped for its format. */
#include <math.h>
#include <string.h>
#include "gate.h"
#include "json_min.h"

const char *fp_gate_verdict(const fp_gate_result_t *res)
{
    switch (fp_gate_exit_code(res)) {
    case FP_GATE_NOT_COMPARABLE: return "NOT COMPARABLE";
    case FP_GATE_REGRESSION: return "REGRESSION";
    case FP_GATE_INCONCLUSIVE: return "INCONCLUSIVE";
    default: return "PASS";
    }
}

static void counts(const fp_gate_result_t *res, size_t n[FP_CHECK_NSTATUS])
{
    memset(n, 0, FP_CHECK_NSTATUS * sizeof *n);
    for (size_t i = 0; i < res->n; i++)
        n[res->checks[i].status]++;
}

/* What a check counts as, the same in every output: "pass", "fail", "skip" or "error". */
static const char *counts_as(const fp_gate_result_t *res, const fp_check_t *c)
{
    switch (c->status) {
    case FP_CHECK_FAIL: return "fail";
    case FP_CHECK_NOT_COMPARABLE: return "error";
    case FP_CHECK_SKIP: return "skip";
    case FP_CHECK_INCONCLUSIVE: return res->inconclusive_fails ? "fail" : "pass";
    default: return "pass";
    }
}

/* "N passed, N failed, N inconclusive (counted as passes), N skipped, N not comparable" */
static void count_line(char *buf, size_t cap, const fp_gate_result_t *res)
{
    size_t n[FP_CHECK_NSTATUS];
    counts(res, n);
    snprintf(buf, cap, "%zu passed, %zu failed, %zu inconclusive (counted as %s), %zu skipped, %zu not comparable",
             n[FP_CHECK_PASS], n[FP_CHECK_FAIL], n[FP_CHECK_INCONCLUSIVE], res->inconclusive_fails ? "failures" : "passes",
             n[FP_CHECK_SKIP], n[FP_CHECK_NOT_COMPARABLE]);
}

void fp_gate_inconclusive_note(char *buf, size_t cap, const fp_gate_result_t *res)
{
    buf[0] = '\0';
    if (res->inconclusive_fails)
        return;
    char names[1024] = "";
    size_t k = 0;
    for (size_t i = 0; i < res->n; i++)
        if (res->checks[i].status == FP_CHECK_INCONCLUSIVE) {
            size_t len = strlen(names);
            snprintf(names + len, sizeof names - len, "%s%s", k++ ? ", " : "", res->checks[i].name);
        }
    if (k)
        snprintf(buf, cap, "%zu check%s inconclusive, counted as %s (--inconclusive pass): %s", k, k == 1 ? "" : "s",
                 k == 1 ? "a pass" : "passes", names);
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
    plain(f, res->baseline[0] ? res->baseline : "(none: checks on the candidate alone)", 0);
    fprintf(f, "\n\n%-*s  %-14s  %s\n", wn, "check", "result", "figures");
    for (size_t i = 0; i < res->n; i++) {
        const fp_check_t *c = &res->checks[i];
        plain(f, c->name, wn);
        fprintf(f, "  %-14s  ", fp_check_status_name(c->status));
        plain(f, c->figures, 0);
        fputc('\n', f);
    }
    char line[256];
    count_line(line, sizeof line, res);
    fprintf(f, "\ngate: %s (%s): exit %d\n", fp_gate_verdict(res), line, fp_gate_exit_code(res));
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
    size_t n[FP_CHECK_NSTATUS];
    counts(res, n);
    size_t failures = n[FP_CHECK_FAIL] + (res->inconclusive_fails ? n[FP_CHECK_INCONCLUSIVE] : 0);
    size_t skipped = n[FP_CHECK_SKIP] + (res->inconclusive_fails ? 0 : n[FP_CHECK_INCONCLUSIVE]);
    size_t errors = n[FP_CHECK_NOT_COMPARABLE];
    for (int level = 0; level < 2; level++)
        fprintf(f, level ? "  <testsuite name=\"fp16probe.gate\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\">\n"
                         : "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                           "<testsuites name=\"fp16probe gate\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\">\n",
                res->n, failures, errors, skipped);
    fputs("    <properties>\n      <property name=\"candidate\" value=\"", f);
    fp_xml_text(f, res->candidate);
    fputs("\"/>\n      <property name=\"baseline\" value=\"", f);
    fp_xml_text(f, res->baseline);
    fprintf(f, "\"/>\n      <property name=\"verdict\" value=\"%s\"/>\n      <property name=\"exit_code\" value=\"%d\"/>\n"
               "      <property name=\"inconclusive\" value=\"%s\"/>\n    </properties>\n",
            fp_gate_verdict(res), fp_gate_exit_code(res), res->inconclusive_fails ? "fail" : "pass");
    for (size_t i = 0; i < res->n; i++) {
        const fp_check_t *c = &res->checks[i];
        fputs("    <testcase classname=\"fp16probe.gate\" name=\"", f);
        fp_xml_text(f, c->name);
        fputs("\" time=\"0\">\n", f);
        const char *elem = NULL, *type = NULL, *prefix = "";
        switch (c->status) {
        case FP_CHECK_FAIL: elem = "failure", type = "regression"; break;
        case FP_CHECK_NOT_COMPARABLE: elem = "error", type = "not-comparable"; break;
        case FP_CHECK_SKIP: elem = "skipped", prefix = "skipped: "; break;
        case FP_CHECK_INCONCLUSIVE:
            if (res->inconclusive_fails)
                elem = "failure", type = "inconclusive", prefix = "inconclusive, counted as a failure (--inconclusive fail): ";
            else
                elem = "skipped", prefix = "inconclusive, counted as a pass (--inconclusive pass): ";
            break;
        default: break;
        }
        if (elem) {
            fprintf(f, "      <%s", elem);
            if (type)
                fprintf(f, " type=\"%s\"", type);
            fprintf(f, " message=\"%s", prefix);
            fp_xml_text(f, c->figures);
            if (strcmp(elem, "skipped") == 0) {
                fputs("\"/>\n", f);
            } else {
                fputs("\">", f);
                fp_xml_text(f, c->figures);
                fprintf(f, "</%s>\n", elem);
            }
        }
        fputs("      <system-out>", f);
        fp_xml_text(f, fp_check_status_name(c->status));
        fputs(": ", f);
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
    char line[256], note[2048];
    count_line(line, sizeof line, res);
    fp_gate_inconclusive_note(note, sizeof note, res);
    fprintf(f, "### fp16probe gate: %s\n\n%s; exit status %d.\n\n", fp_gate_verdict(res), line, fp_gate_exit_code(res));
    if (note[0]) {
        fputs("> **Warning:** ", f);
        md_cell(f, note);
        fputs("\n\n", f);
    }
    fputs("Candidate: ", f);
    md_cell(f, res->candidate);
    fputs("  \nBaseline: ", f);
    md_cell(f, res->baseline[0] ? res->baseline : "none (checks on the candidate alone)");
    fputs("\n\n| check | result | figures |\n|---|---|---|\n", f);
    for (size_t i = 0; i < res->n; i++) {
        const fp_check_t *c = &res->checks[i];
        const char *shown = c->status == FP_CHECK_PASS ? "pass"
                            : c->status == FP_CHECK_FAIL ? "**FAIL**"
                            : c->status == FP_CHECK_SKIP ? "skip"
                            : c->status == FP_CHECK_NOT_COMPARABLE ? "**NOT COMPARABLE**"
                            : res->inconclusive_fails ? "**inconclusive** (counted as a failure)"
                                                      : "*inconclusive* (counted as a pass)";
        fputs("| ", f);
        md_cell(f, c->name);
        fprintf(f, " | %s | ", shown);
        md_cell(f, c->figures);
        fputs(" |\n", f);
    }
    fputs("\n", f);
}

static void json_num(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.10g", x);
    else
        fputs("null", f);
}

void fp_gate_json(FILE *f, const fp_gate_result_t *res)
{
    size_t n[FP_CHECK_NSTATUS];
    counts(res, n);
    fprintf(f, "{\n  \"tool\": \"fp16probe gate\",\n  \"verdict\": \"%s\",\n  \"exit_code\": %d,\n  \"inconclusive\": \"%s\",\n",
            fp_gate_verdict(res), fp_gate_exit_code(res), res->inconclusive_fails ? "fail" : "pass");
    fputs("  \"candidate\": ", f);
    fp_json_string(f, res->candidate);
    fputs(",\n  \"baseline\": ", f);
    if (res->baseline[0])
        fp_json_string(f, res->baseline);
    else
        fputs("null", f);
    fputs(",\n  \"ranks\": {\"baseline\": ", f);   /* null: no baseline, or not known */
    json_num(f, res->baseline[0] && res->ranks_base > 0 ? res->ranks_base : NAN);
    fputs(", \"candidate\": ", f);
    json_num(f, res->ranks_cand > 0 ? res->ranks_cand : NAN);
    fputc('}', f);
    fprintf(f, ",\n  \"counts\": {\"pass\": %zu, \"fail\": %zu, \"inconclusive\": %zu, \"skip\": %zu, \"not_comparable\": %zu},\n",
            n[FP_CHECK_PASS], n[FP_CHECK_FAIL], n[FP_CHECK_INCONCLUSIVE], n[FP_CHECK_SKIP], n[FP_CHECK_NOT_COMPARABLE]);
    fputs("  \"differences\": [", f);
    for (size_t i = 0; i < res->ndiffs; i++) {
        const fp_gate_diff_t *d = &res->diffs[i];
        fprintf(f, "%s\n    {\"key\": \"%s\", \"what\": ", i ? "," : "", fp_gate_key_name(d->key));
        fp_json_string(f, d->what);
        fputs(", \"baseline\": ", f);
        fp_json_string(f, d->base);
        fputs(", \"candidate\": ", f);
        fp_json_string(f, d->cand);
        fprintf(f, ", \"allowed\": %s}", d->allowed ? "true" : "false");
    }
    fputs(res->ndiffs ? "\n  ],\n  \"checks\": [" : "],\n  \"checks\": [", f);
    for (size_t i = 0; i < res->n; i++) {
        const fp_check_t *c = &res->checks[i];
        fputs(i ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
        fp_json_string(f, c->name);
        fputs(", \"kind\": ", f);
        fp_json_string(f, c->kind);
        fputs(", \"arm\": ", f);
        if (c->arm[0])
            fp_json_string(f, c->arm);
        else
            fputs("null", f);
        fprintf(f, ", \"status\": \"%s\", \"counts_as\": \"%s\", \"value\": ", fp_check_status_name(c->status),
                counts_as(res, c));
        json_num(f, c->value);
        fputs(", \"limit\": ", f);
        json_num(f, c->limit);
        fputs(", \"other\": ", f);
        json_num(f, c->other);
        fputs(", \"p\": ", f);
        json_num(f, c->p);
        fputs(", \"unit\": ", f);
        fp_json_string(f, c->unit);
        fputs(", \"figures\": ", f);
        fp_json_string(f, c->figures);
        fputs("}", f);
    }
    fputs(res->n ? "\n  ]\n}\n" : "]\n}\n", f);
}

/* A GitHub workflow command's data (is_property: also ':' and ','), escaped as the runner expects. */
static void gh_escape(FILE *f, const char *s, int is_property)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '%')
            fputs("%25", f);
        else if (*p == '\r')
            fputs("%0D", f);
        else if (*p == '\n')
            fputs("%0A", f);
        else if (is_property && *p == ':')
            fputs("%3A", f);
        else if (is_property && *p == ',')
            fputs("%2C", f);
        else if (*p >= 0x20 && *p != 0x7F)
            fputc(*p, f);
    }
}

void fp_gate_github(FILE *f, const fp_gate_result_t *res)
{
    for (size_t i = 0; i < res->n; i++) {
        const fp_check_t *c = &res->checks[i];
        const char *level = c->status == FP_CHECK_FAIL || c->status == FP_CHECK_NOT_COMPARABLE ? "error"
                            : c->status == FP_CHECK_INCONCLUSIVE ? (res->inconclusive_fails ? "error" : "warning")
                                                                 : NULL;
        if (!level)
            continue;
        fprintf(f, "::%s title=", level);
        char title[160];
        snprintf(title, sizeof title, "fp16probe gate %s %s", c->name, fp_check_status_name(c->status));
        gh_escape(f, title, 1);
        fputs("::", f);
        gh_escape(f, c->figures, 0);
        fputc('\n', f);
    }
}
