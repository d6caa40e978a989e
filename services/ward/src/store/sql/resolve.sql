-- One question, one statement: its own READ COMMITTED snapshot and the database clock; no lock,
-- no cache. The session with this token digest, its credential and principal, and - when an
-- action is asked about - whether one live, unexpired, exact assignment answers it: same
-- action, audience and purpose, and the object itself or `<type>:*` of its type.
--   $1 session token digest   $2 action (NULL: authentication only)   $3 object
--   $4 `<type>:*` of the object (NULL when the object has no valid type)
--   $5 audience   $6 purpose
SELECT s.id AS session_id,
       s.expires_at AS session_expires_at,
       s.revoked_at IS NOT NULL AS session_revoked,
       s.expires_at <= statement_timestamp() AS session_expired,
       c.revoked_at IS NOT NULL AS credential_revoked,
       c.expires_at <= statement_timestamp() AS credential_expired,
       p.id AS principal_id,
       p.kind AS principal_kind,
       p.name AS principal_name,
       p.policy_generation,
       p.revocation_generation,
       p.revoked_at AS principal_revoked_at,
       p.created_at AS principal_created_at,
       ($2::text IS NOT NULL AND EXISTS (
           SELECT 1 FROM ward.assignments a
           WHERE a.principal_id = p.id
             AND a.action = $2
             AND a.audience = $5
             AND a.purpose = $6
             AND (a.object = $3 OR a.object = $4)
             AND a.revoked_at IS NULL
             AND (a.expires_at IS NULL OR a.expires_at > statement_timestamp())
       )) AS assigned
FROM ward.sessions s
JOIN ward.credentials c ON c.id = s.credential_id
JOIN ward.principals p ON p.id = s.principal_id
WHERE s.digest = $1
