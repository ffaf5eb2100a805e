# lib/store.mk — the run store (issue 3): filled in by the store work.
