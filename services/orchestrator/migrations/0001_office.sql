-- The orchestrator schema itself is created by provisioning (roles and schema, as a superuser);
-- this first migration only states what the schema is for. Later migrations add tables.
COMMENT ON SCHEMA orchestrator IS 'LychD Orchestrator office: converges hardware; never grants a lease or picks a semantic provider';
