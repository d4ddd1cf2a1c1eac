-- fence--1.0--1.4.sql -- ALTER EXTENSION fence UPDATE (TO '1.4') from 1.0.
--
-- 1.4 keeps the C guard and check (the same functions: every table
-- protected with them keeps its triggers and stays guarded through the
-- update) and drops what read PostgreSQL's internals or hooked into its
-- planner and executor: fence.c_restoring.  (It does not add
-- fence.c_advance, which 1.1 to 1.3 had: 1.4 has none.)  From 1.4 on, the
-- guards admit only a token that fence.use_token() (fence.sql version 5)
-- gave to the writing transaction: run fence.sql version 5 first, and move
-- writers from SET LOCAL fence.token to SELECT fence.use_token(...)
-- (docs/postgres.md, "Upgrading to version 5").

\echo Use "ALTER EXTENSION fence UPDATE TO '1.4'" to load this file. \quit

DROP FUNCTION fence.c_restoring();

-- Rebind the guard and check to 1.4's symbols (CREATE OR REPLACE keeps
-- each function, so every trigger stays): a backend still running the
-- older fence.so has no such symbol and refuses the write (42883) instead
-- of applying the older rule.
CREATE OR REPLACE FUNCTION fence.c_guard() RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_c_guard_v2'
LANGUAGE C;
CREATE OR REPLACE FUNCTION fence.c_check() RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_c_check_v2'
LANGUAGE C;
