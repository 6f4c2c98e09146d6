# syntax=docker/dockerfile:1
# One image, two entry points: tickwork-operator (default) and tickwork-worker.
# Build:  docker build -t tickwork:dev .
# The demo image (the same plus Tickwork's demo tasks, for the scaling guide and
# the Pods tests): docker build --target demo -t tickwork-demo:dev .
# Runs as a non-root user and works with a read-only root filesystem.
#
# PYTHON_IMAGE is any Debian-family image with python3 (and python3-venv on
# Debian's own python3): the public default below for users; `make image`
# passes a base built from Debian's packages, because no registry is reachable
# there. Tickwork lives in a virtualenv, so both kinds of base work alike.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# Must equal project.version in pyproject.toml (a test checks it).
ARG TICKWORK_VERSION=0.1.0

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml constraints.txt README.md ./
# Wheels of every dependency (OpenTelemetry's for traces too: off unless an OTLP
# endpoint is set), at the versions CI tested, in a layer of their own: a change to
# Tickwork's sources does not download them again.
RUN python3 -m venv /opt/build \
 && /opt/build/bin/python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print(*p['dependencies'], *p['optional-dependencies']['traces'], sep='\n')" > requirements.txt \
 && /opt/build/bin/pip wheel --wheel-dir /wheels --constraint constraints.txt --requirement requirements.txt
COPY tickwork ./tickwork
COPY operator ./operator
COPY worker ./worker
RUN /opt/build/bin/pip wheel --no-deps --wheel-dir /wheels .
COPY dev/demo-tasks ./demo-tasks
RUN /opt/build/bin/pip wheel --no-deps --wheel-dir /demo-wheels ./demo-tasks

FROM ${PYTHON_IMAGE} AS runtime
ARG TICKWORK_VERSION
LABEL org.opencontainers.image.title="tickwork" \
      org.opencontainers.image.description="Scheduled jobs for Kubernetes: operator and worker" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${TICKWORK_VERSION}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    PATH=/opt/tickwork/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN groupadd --gid 10001 tickwork \
 && useradd --uid 10001 --gid tickwork --no-create-home --shell /usr/sbin/nologin tickwork
# tini is each container's PID 1: the kernel drops a signal that PID 1 has no handler
# for, so a Python PID 1 ignores a SIGTERM that comes before its handlers exist (a Pod
# deleted while it starts then waits out its grace period), and nothing reaps the
# orphans a command task leaves. Debian's package; the local base already has it.
# Pinned to bookworm's version (PYTHON_IMAGE is a bookworm image).
ARG TINI_VERSION=0.19.0-1+b3
RUN command -v tini >/dev/null \
 || { apt-get update \
      && apt-get install --yes --no-install-recommends "tini=${TINI_VERSION}" \
      && rm -rf /var/lib/apt/lists/*; }
COPY --from=build /wheels /wheels
# Install only from the wheels built above (no index), then drop them and pip:
# nothing in the running image installs packages.
RUN python3 -m venv /opt/tickwork \
 && /opt/tickwork/bin/pip install --no-index --find-links /wheels "tickwork[traces]==${TICKWORK_VERSION}" \
 && /opt/tickwork/bin/pip uninstall --yes pip \
 && rm -rf /wheels
USER 10001:10001
EXPOSE 8080 8081
ENTRYPOINT ["tini", "--"]
CMD ["tickwork-operator"]

# Tickwork's demo tasks on top of the product (users build their own task images
# the same way, see docs/tasks.md). The runtime has no pip: a pure-Python wheel
# is a zip, unpacked into the virtualenv's site-packages.
FROM runtime AS demo
USER 0:0
COPY --from=build /demo-wheels /demo-wheels
RUN site="$(/opt/tickwork/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && /opt/tickwork/bin/python -c "import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]" "$site" /demo-wheels/*.whl \
 && rm -rf /demo-wheels
USER 10001:10001

# The default target: the product, without the demo tasks.
FROM runtime AS product
