-- One statement answers one or more questions about session tokens: its own READ COMMITTED
-- snapshot and the database clock; no lock, no cache. For each question n (its ordinal in the
-- arrays), the session with that token digest, its credential and principal, and - when an
-- action is asked about - whether one live, unexpired, exact assignment answers it: same
-- action, audience and purpose, and the object itself or `<type>:*` of its type. A question
-- whose digest matches no session yields no row.
--   $1 session token digests   $2 actions (NULL: authentication only)   $3 objects
--   $4 `<type>:*` of each object (NULL when the object has no valid type)
--   $5 audiences (the office each token is presented to; never NULL)   $6 purposes
SELECT q.n,
       s.id AS session_id,
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
       q.audience = ANY (s.audiences) AS audience_bound,
       (q.action IS NOT NULL AND EXISTS (
           SELECT 1 FROM ward.assignments a
           WHERE a.principal_id = p.id
             AND a.action = q.action
             AND a.audience = q.audience
             AND a.purpose = q.purpose
             AND (a.object = q.object OR a.object = q.wildcard)
             AND a.revoked_at IS NULL
             AND (a.expires_at IS NULL OR a.expires_at > statement_timestamp())
       )) AS assigned
FROM unnest($1::bytea[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
         WITH ORDINALITY AS q(digest, action, object, wildcard, audience, purpose, n)
JOIN ward.sessions s ON s.digest = q.digest
JOIN ward.credentials c ON c.id = s.credential_id
JOIN ward.principals p ON p.id = s.principal_id
