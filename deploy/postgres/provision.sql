-- Generated from lychd_runtime::db::provision_all_sql("lychd"); a test keeps it equal.
-- Run once as a superuser connected to database `lychd`, then give each role a password
-- (\password lychd_<office>_owner / lychd_<office>_app) and store them as Podman secrets.

DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_dispatcher_owner') THEN
             CREATE ROLE lychd_dispatcher_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_dispatcher_app') THEN
             CREATE ROLE lychd_dispatcher_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
         END $$;

DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_orchestrator_owner') THEN
             CREATE ROLE lychd_orchestrator_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_orchestrator_app') THEN
             CREATE ROLE lychd_orchestrator_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
         END $$;

DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_ward_owner') THEN
             CREATE ROLE lychd_ward_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_ward_app') THEN
             CREATE ROLE lychd_ward_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
         END $$;

DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_archive_owner') THEN
             CREATE ROLE lychd_archive_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_archive_app') THEN
             CREATE ROLE lychd_archive_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
         END $$;

DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_helmloop_owner') THEN
             CREATE ROLE lychd_helmloop_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_helmloop_app') THEN
             CREATE ROLE lychd_helmloop_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
         END $$;

DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_runner_owner') THEN
             CREATE ROLE lychd_runner_owner LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lychd_runner_app') THEN
             CREATE ROLE lychd_runner_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
         END $$;

REVOKE CREATE, TEMPORARY ON DATABASE "lychd" FROM PUBLIC;

REVOKE CREATE ON SCHEMA public FROM PUBLIC;

CREATE SCHEMA IF NOT EXISTS dispatcher AUTHORIZATION lychd_dispatcher_owner;
         REVOKE ALL ON SCHEMA dispatcher FROM PUBLIC;
         GRANT USAGE ON SCHEMA dispatcher TO lychd_dispatcher_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_dispatcher_owner IN SCHEMA dispatcher
           GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO lychd_dispatcher_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_dispatcher_owner IN SCHEMA dispatcher
           GRANT USAGE, SELECT ON SEQUENCES TO lychd_dispatcher_app;
         ALTER ROLE lychd_dispatcher_owner SET search_path = dispatcher;
         ALTER ROLE lychd_dispatcher_app SET search_path = dispatcher;

CREATE SCHEMA IF NOT EXISTS orchestrator AUTHORIZATION lychd_orchestrator_owner;
         REVOKE ALL ON SCHEMA orchestrator FROM PUBLIC;
         GRANT USAGE ON SCHEMA orchestrator TO lychd_orchestrator_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_orchestrator_owner IN SCHEMA orchestrator
           GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO lychd_orchestrator_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_orchestrator_owner IN SCHEMA orchestrator
           GRANT USAGE, SELECT ON SEQUENCES TO lychd_orchestrator_app;
         ALTER ROLE lychd_orchestrator_owner SET search_path = orchestrator;
         ALTER ROLE lychd_orchestrator_app SET search_path = orchestrator;

CREATE SCHEMA IF NOT EXISTS ward AUTHORIZATION lychd_ward_owner;
         REVOKE ALL ON SCHEMA ward FROM PUBLIC;
         GRANT USAGE ON SCHEMA ward TO lychd_ward_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_ward_owner IN SCHEMA ward
           GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO lychd_ward_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_ward_owner IN SCHEMA ward
           GRANT USAGE, SELECT ON SEQUENCES TO lychd_ward_app;
         ALTER ROLE lychd_ward_owner SET search_path = ward;
         ALTER ROLE lychd_ward_app SET search_path = ward;

CREATE SCHEMA IF NOT EXISTS archive AUTHORIZATION lychd_archive_owner;
         REVOKE ALL ON SCHEMA archive FROM PUBLIC;
         GRANT USAGE ON SCHEMA archive TO lychd_archive_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_archive_owner IN SCHEMA archive
           GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO lychd_archive_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_archive_owner IN SCHEMA archive
           GRANT USAGE, SELECT ON SEQUENCES TO lychd_archive_app;
         ALTER ROLE lychd_archive_owner SET search_path = archive;
         ALTER ROLE lychd_archive_app SET search_path = archive;

CREATE SCHEMA IF NOT EXISTS helmloop AUTHORIZATION lychd_helmloop_owner;
         REVOKE ALL ON SCHEMA helmloop FROM PUBLIC;
         GRANT USAGE ON SCHEMA helmloop TO lychd_helmloop_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_helmloop_owner IN SCHEMA helmloop
           GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO lychd_helmloop_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_helmloop_owner IN SCHEMA helmloop
           GRANT USAGE, SELECT ON SEQUENCES TO lychd_helmloop_app;
         ALTER ROLE lychd_helmloop_owner SET search_path = helmloop;
         ALTER ROLE lychd_helmloop_app SET search_path = helmloop;

CREATE SCHEMA IF NOT EXISTS runner AUTHORIZATION lychd_runner_owner;
         REVOKE ALL ON SCHEMA runner FROM PUBLIC;
         GRANT USAGE ON SCHEMA runner TO lychd_runner_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_runner_owner IN SCHEMA runner
           GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO lychd_runner_app;
         ALTER DEFAULT PRIVILEGES FOR ROLE lychd_runner_owner IN SCHEMA runner
           GRANT USAGE, SELECT ON SEQUENCES TO lychd_runner_app;
         ALTER ROLE lychd_runner_owner SET search_path = runner;
         ALTER ROLE lychd_runner_app SET search_path = runner;
