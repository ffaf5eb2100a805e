/* db_remove.h — removing a SQLite database file together with its WAL side files (PATH-wal, PATH-shm), as
 * a temporary store or a scratch one is cleaned up. */
#ifndef FP_LIB_DB_REMOVE_H
#define FP_LIB_DB_REMOVE_H

/* Removes path, path-wal and path-shm; those that do not exist are fine. */
void fp_db_remove(const char *path);

#endif
