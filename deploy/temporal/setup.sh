#!/bin/sh
# One-shot job (docker-compose.yml: temporal-setup): settled's namespace with its retention, and the
# search attributes operators find actions by. Idempotent, so it runs on every `docker compose up`.
# The names and types come from docker-compose.yml (SEARCH_ATTRIBUTES, "Name=Type ..."), which
# tests/deploy/test_compose.py holds equal to settled/visibility.py. The temporal CLI reads
# TEMPORAL_ADDRESS from the environment.
set -eu
: "${SETTLED_NAMESPACE:?}" "${NAMESPACE_RETENTION:?}" "${SEARCH_ATTRIBUTES:?}"

# retry WHAT COMMAND...: up to 3 minutes, then fail (the job's restart policy tries again).
retry() {
    what=$1
    shift
    tries=0
    until "$@" >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -ge 90 ]; then
            echo "temporal-setup: $what after 3 minutes" >&2
            exit 1
        fi
        sleep 2
    done
}

serving() {
    temporal operator cluster health | grep -q SERVING
}

retry "Temporal at $TEMPORAL_ADDRESS is not serving" serving

if temporal operator namespace describe --namespace "$SETTLED_NAMESPACE" >/dev/null 2>&1; then
    temporal operator namespace update --namespace "$SETTLED_NAMESPACE" --retention "$NAMESPACE_RETENTION"
else
    temporal operator namespace create --namespace "$SETTLED_NAMESPACE" --retention "$NAMESPACE_RETENTION"
fi

# A new namespace reaches the frontend's namespace cache within seconds; until then it is "not found".
retry "namespace $SETTLED_NAMESPACE is not visible" \
    temporal operator search-attribute list --namespace "$SETTLED_NAMESPACE"

# One create for all of them: the CLI refuses an existing attribute of another type, and the server
# leaves an existing attribute of the same type as it is.
set --
for pair in $SEARCH_ATTRIBUTES; do
    set -- "$@" --name "${pair%%=*}" --type "${pair#*=}"
done
temporal operator search-attribute create --namespace "$SETTLED_NAMESPACE" "$@"
echo "temporal-setup: namespace $SETTLED_NAMESPACE, retention $NAMESPACE_RETENTION, search attributes $SEARCH_ATTRIBUTES"
