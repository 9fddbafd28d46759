-- kvtrail schema, version 2: session revocations.
--
-- Session cookies are signed and carry their own expiry, so without a
-- server-side record a logged-out cookie stays valid until it expires.
-- Logout inserts the session's id here; every instance looks the id up on
-- each request with a session cookie, so a logout holds behind a load
-- balancer too. session_id is a hash of the cookie's nonce (nothing here
-- can forge a cookie or a CSRF token). Rows matter only until `expires`;
-- the table holds one small row per logout.
CREATE TABLE IF NOT EXISTS {{table "session_revocations"}} {{on_cluster}}
(
    session_id  String,
    user        String,
    revoked_at  DateTime,
    expires     DateTime
)
ENGINE = {{engine "session_revocations" "ReplacingMergeTree"}}
PARTITION BY toYYYYMM(expires)
ORDER BY session_id
SETTINGS index_granularity = 1024;
{{distributed "session_revocations" "cityHash64(session_id)"}}
