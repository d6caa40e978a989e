-- The runner schema itself is created by provisioning (roles and schema, as a superuser);
-- this first migration only states what the schema is for. Later migrations add tables.
COMMENT ON SCHEMA runner IS 'LychD Runner office: continues bounded loop runs under loop-contract v1; holds no grant, hardware, consent or promotion authority';
