# One image for settled's API and worker: docker-compose.yml runs it twice, with `settled api` and
# `settled worker`. The project's own machines have no Docker engine, so this file is not built
# there. It installs the server extra exactly as the tests ran it: the lock's pins with their hashes
# (deploy/requirements-server.txt, written by `make lock`), then the project itself without resolving
# anything again.
FROM python:3.11.13-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# What the package is built from (pyproject.toml's packages); tests and docs stay out.
COPY deploy/requirements-server.txt ./
RUN pip install --require-hashes --no-deps -r requirements-server.txt
COPY pyproject.toml ./
COPY settled ./settled
COPY workflows ./workflows
COPY gateway ./gateway
COPY cli ./cli
COPY activities ./activities
COPY workers ./workers
COPY api ./api
COPY adapters ./adapters
COPY sandbox ./sandbox
COPY drill ./drill
COPY soak ./soak
COPY bench ./bench
# The server extra only (its pins are in): no test, tool or framework extras. Then what production never runs leaves the
# image: the sandbox business services, the drill, the soak and the benchmark (they are built as one
# package with the rest, and removed from it here).
# Bytecode for everything installed: the workflow sandbox re-imports the workflow modules for every
# workflow, and the installed tree is read-only at run time.
RUN pip install --no-deps ".[server]" \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    && rm -rf "$site/settled/sandbox" "$site/settled/drill" "$site/settled/soak" "$site/settled/bench" \
    && python -m compileall -q "$site" \
    && rm -rf /src

# An unprivileged user: the installed code is root's and read-only to it; only its home is writable.
RUN useradd --system --uid 10001 --create-home --home-dir /home/settled --shell /usr/sbin/nologin settled
USER 10001
WORKDIR /home/settled

EXPOSE 8000
# For the API (the compose file gives the worker a check of its own).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["settled", "api", "--host", "0.0.0.0"]
