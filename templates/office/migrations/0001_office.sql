-- The {{office}} schema itself is created by provisioning (roles and schema, as a superuser);
-- this first migration only states what the schema is for. Later migrations add tables.
COMMENT ON SCHEMA {{office}} IS 'LychD {{Office}} office: {{purpose}}';
