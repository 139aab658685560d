-- Runs once, when the PostgreSQL volume is first initialised (docker-entrypoint-initdb.d).
-- The image creates POSTGRES_DB (temporal); Temporal's visibility store needs a second database.
CREATE DATABASE temporal_visibility;
