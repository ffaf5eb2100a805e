/* db_remove.c — a database file and its side files removed (db_remove.h). Promise: the three paths only,
 * nothing else; a missing one is no error. */
#include "db_remove.h"
#include <stdio.h>
#include <unistd.h>

void fp_db_remove(const char *path)
{
    char side[4200];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}
