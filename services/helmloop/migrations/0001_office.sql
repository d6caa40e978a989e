-- The helmloop schema itself is created by provisioning (roles and schema, as a superuser);
-- this first migration only states what the schema is for. Later migrations add tables.
COMMENT ON SCHEMA helmloop IS 'LychD HelmLoop office: reduces records into a disposition; never creates owner records, reads the clock or executes anything';
