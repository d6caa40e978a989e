-- The archive schema itself is created by provisioning (roles and schema, as a superuser);
-- this first migration only states what the schema is for. Later migrations add tables.
COMMENT ON SCHEMA archive IS 'LychD Archive office: keeps and recalls notes with receipts; never decides what is true or recalls across namespaces';
