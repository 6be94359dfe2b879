# One image for every role (mlflow server, trainer, API). It installs the project the way README
# does (pip install of this pyproject, torch pinned to 2.13.0) and runs as a non-root user.
#   GPU (default): torch from PyPI, which bundles CUDA; run with the NVIDIA container toolkit.
#   CPU only:      --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu (see docker-compose.cpu.yml)
FROM python:3.11-slim

ARG TORCH_INDEX_URL=https://pypi.org/simple
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FORECASTER_DATA_DIR=/app/data

RUN apt-get update \
    && apt-get install -y --no-install-recommends git curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 forecaster

WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
COPY forecaster ./forecaster
COPY infra ./infra
COPY monitoring ./monitoring
COPY pipelines ./pipelines
COPY service ./service
COPY data ./data
RUN pip install --index-url "${TORCH_INDEX_URL}" --extra-index-url https://pypi.org/simple torch==2.13.0 \
    && pip install -c requirements.lock ".[s3]" \
    && chown -R forecaster:forecaster /app

USER forecaster
EXPOSE 8000 5000
# Requests still waiting 5 s after SIGTERM get 503; the forecast log then has FORECAST_LOG_DRAIN_S
# (5 s) to write what it holds: compose gives the API 15 s before it kills (stop_grace_period)
CMD ["uvicorn", "--factory", "service.main:create_app", "--host", "0.0.0.0", "--port", "8000", "--timeout-graceful-shutdown", "5"]
