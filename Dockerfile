# syntax=docker/dockerfile:1
# One image, two entry points: tickwork-operator (default) and tickwork-worker.
# Build:  docker build -t tickwork:dev .
# Runs as a non-root user and works with a read-only root filesystem.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# Must equal project.version in pyproject.toml (a test checks it).
ARG TICKWORK_VERSION=0.1.0

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml constraints.txt README.md ./
COPY tickwork ./tickwork
COPY operator ./operator
COPY worker ./worker
# Wheels of Tickwork and of every dependency, at the versions CI tested.
RUN pip wheel --wheel-dir /wheels --constraint constraints.txt .

FROM ${PYTHON_IMAGE} AS runtime
ARG TICKWORK_VERSION
LABEL org.opencontainers.image.title="tickwork" \
      org.opencontainers.image.description="Scheduled jobs for Kubernetes: operator and worker" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp
RUN groupadd --gid 10001 tickwork \
 && useradd --uid 10001 --gid tickwork --no-create-home --shell /usr/sbin/nologin tickwork
COPY --from=build /wheels /wheels
# Install only from the wheels built above (no index), then drop them.
RUN pip install --no-index --find-links /wheels "tickwork==${TICKWORK_VERSION}" \
 && rm -rf /wheels
USER 10001:10001
EXPOSE 8080 8081
ENTRYPOINT []
CMD ["tickwork-operator"]
