/* process_mem.c — this process's resident memory: current (/proc/self/statm) and peak (VmHWM).
 * Promises: -1 (NULL in the store) when the file cannot be read, never 0. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "probe/probe.h"

int64_t fp_process_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    unsigned long long size, rss;
    int ok = fscanf(f, "%llu %llu", &size, &rss) == 2;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (int64_t)rss * page : -1;
}

int64_t fp_process_peak_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    int64_t v = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (strncmp(line, "VmHWM:", 6) == 0 && sscanf(line + 6, "%llu", &kb) == 1) {
            v = (int64_t)kb * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}
