/* store_intern.c — StringIds interning (store.h, fp_store_intern): a name gets its id at once from an
 * open-addressing table loaded from the file when the store opens; a new name's row is queued. Promise:
 * one id per name for the life of the file; safe from any producer thread. */
#include <stdlib.h>
#include <string.h>
#include "store_writer_internal.h"

static uint64_t hash_str(const char *t)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *t; t++)
        h = (h ^ (unsigned char)*t) * 1099511628211ULL;
    return h;
}

static intern_slot_t *find_slot(intern_slot_t *slots, size_t nslots, const char *t)
{
    size_t i = (size_t)hash_str(t) & (nslots - 1);
    while (slots[i].s && strcmp(slots[i].s, t) != 0)
        i = (i + 1) & (nslots - 1);
    return &slots[i];
}

/* Insert (taking ownership of t) with the table at most half full. */
static int intern_insert(fp_store_t *s, char *t, int64_t id)
{
    if ((s->nused + 1) * 2 > s->nslots) {
        size_t n = s->nslots ? s->nslots * 2 : 256;
        intern_slot_t *ns = calloc(n, sizeof *ns);
        if (!ns)
            return FP_ENOMEM;
        for (size_t i = 0; i < s->nslots; i++)
            if (s->slots[i].s)
                *find_slot(ns, n, s->slots[i].s) = s->slots[i];
        free(s->slots);
        s->slots = ns;
        s->nslots = n;
    }
    intern_slot_t *slot = find_slot(s->slots, s->nslots, t);
    slot->s = t;
    slot->id = id;
    s->nused++;
    return FP_OK;
}

int fp_sw_load_strings(fp_store_t *s)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "SELECT id, value FROM StringIds", -1, &st, NULL);
    s->next_string_id = 1;
    while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        char *t = strdup((const char *)sqlite3_column_text(st, 1));
        if (!t || intern_insert(s, t, id) != FP_OK) {
            free(t);
            sqlite3_finalize(st);
            return fp_fail(FP_ENOMEM, "%s: out of memory loading kernel names", s->path);
        }
        if (id >= s->next_string_id)
            s->next_string_id = id + 1;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? FP_OK : fp_store_sqlite_fail(s->db, rc, s->path, "loading kernel names");
}

int64_t fp_store_intern(fp_store_t *s, const char *name)
{
    if (!name)
        return fp_fail(FP_EINVAL, "store: intern: no name");
    int rc = fp_sw_failed_rc(s);
    if (rc != FP_OK)
        return rc;
    pthread_mutex_lock(&s->intern_mu);
    intern_slot_t *slot = s->nslots ? find_slot(s->slots, s->nslots, name) : NULL;
    int64_t id;
    if (slot && slot->s) {
        id = slot->id;
    } else {
        char *mine = strdup(name), *queued = strdup(name);
        id = s->next_string_id;
        fp_rec_t r = {.kind = FP_REC_STRING, .a = id};
        r.u.owned = queued;
        if (!mine || !queued || intern_insert(s, mine, id) != FP_OK) {
            free(mine);
            free(queued);
            id = fp_fail(FP_ENOMEM, "store: out of memory interning a name");
        } else {
            s->next_string_id++;
            if ((rc = fp_sw_push_owned(s, &r)) != FP_OK)
                id = rc;   /* the name stays known; its StringIds row is lost with the queue */
        }
    }
    pthread_mutex_unlock(&s->intern_mu);
    return id;
}

void fp_sw_free_strings(fp_store_t *s)
{
    for (size_t i = 0; i < s->nslots; i++)
        free(s->slots[i].s);
    free(s->slots);
    s->slots = NULL;
    s->nslots = s->nused = 0;
}
