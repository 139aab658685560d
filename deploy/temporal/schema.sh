#!/bin/sh
# One-shot job (docker-compose.yml: temporal-schema): creates or upgrades Temporal's PostgreSQL
# schemas before the server starts. Idempotent, so it runs on every `docker compose up`: setup-schema
# only records version 0.0 on an empty database, and update-schema applies only the versions the
# database lacks (which is also how an upgraded server image gets its migrations).
# temporal-sql-tool reads SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER and SQL_PASSWORD from the environment.
set -eu
schemas=/etc/temporal/schema/postgresql/v12

for store in temporal:temporal visibility:temporal_visibility; do
    database=${store#*:}
    temporal-sql-tool --db "$database" setup-schema -v 0.0
    temporal-sql-tool --db "$database" update-schema -d "$schemas/${store%%:*}/versioned"
done
echo "temporal-schema: temporal and temporal_visibility are up to date"
