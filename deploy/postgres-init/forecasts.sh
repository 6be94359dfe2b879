#!/bin/sh
# Run by the postgres image on a fresh data volume (/docker-entrypoint-initdb.d): a second database
# beside MLflow's for the API's forecast log (FORECAST_LOG_URL). On a volume created before this
# script existed, create it once by hand:
#   docker compose exec postgres createdb -U "$POSTGRES_USER" forecasts
set -e
createdb -U "$POSTGRES_USER" "${FORECAST_LOG_DB:-forecasts}"
