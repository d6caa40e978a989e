-- The dispatcher schema itself is created by provisioning (roles and schema, as a superuser);
-- this first migration only states what the schema is for. Later migrations add tables.
COMMENT ON SCHEMA dispatcher IS 'LychD Dispatcher office: grants temporary leases on WARM capabilities; never starts, stops, loads or evicts a runtime';
