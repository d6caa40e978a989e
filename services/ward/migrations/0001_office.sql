-- The ward schema itself is created by provisioning (roles and schema, as a superuser);
-- this first migration only states what the schema is for. Later migrations add tables.
COMMENT ON SCHEMA ward IS 'LychD Ward office: authenticates, authorizes, records consent; never executes an effect';
