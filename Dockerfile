# tunnelmux daemon image. See docs/deploy.md for running it; deploy/dockerfile_test.ts runs this
# file's ENTRYPOINT, CMD, ENV and HEALTHCHECK locally, so keep them in JSON (exec) form.

# --- Runtime dependencies --------------------------------------------------------------------
# npm, not `deno install`: package.json lists the pinned deno binary (and the test tools) as
# devDependencies (Bun too); `--omit=dev` installs the lockfile's runtime set: hono, ACME and
# x509 for certificates, and the NATS client (loaded only in a cluster). Only the manifest and
# lockfile are copied, so this layer is rebuilt only when they change.
FROM node:22.12.0-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund

# --- The image -------------------------------------------------------------------------------
# The Deno pinned in package.json. The debian variant: tini at /tini (distroless has it too, bin
# does not), a shell for the RUN steps and a non-root user `deno`, uid 1993 (distroless has
# neither).
FROM denoland/deno:debian-2.9.6
WORKDIR /app
# deno.json maps the npm: imports; with "nodeModulesDir": "manual" Deno reads them from
# node_modules and never downloads at run time.
COPY --from=deps /app/node_modules ./node_modules
COPY deno.json package.json ./
COPY util ./util
COPY protocol ./protocol
COPY transport ./transport
COPY tunnel ./tunnel
COPY daemon ./daemon

# The data directory holds minted tokens (hashes only); the daemon writes it as uid 1993.
RUN mkdir -p /data /etc/tunnelmux && chown 1993:1993 /data
USER 1993:1993
# Transpile once at build time, as the runtime user, so starts do not and DENO_DIR is writable.
RUN deno cache daemon/main.ts

# Inside the container the listeners bind every interface; publish the admin API on the host's
# loopback only (docker run -p 127.0.0.1:7081:7081). Config file and TLS files go under
# /etc/tunnelmux or /run/secrets (the only other paths the daemon may read). Tokens come from
# TUNNELMUX_TOKEN and TUNNELMUX_ADMIN_TOKEN or a mounted config file at run time, never from the
# image.
ENV TUNNELMUX_LISTEN_TCP=0.0.0.0:7000 \
    TUNNELMUX_LISTEN_WS=0.0.0.0:7080 \
    TUNNELMUX_LISTEN_ADMIN=0.0.0.0:7081 \
    TUNNELMUX_DATA_DIR=/data \
    TUNNELMUX_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 7000 7080 7081

# The daemon's own probe (the image has no curl): /readyz of the admin listener from the env.
HEALTHCHECK --interval=30s --timeout=10s --start-period=15s --retries=3 \
    CMD ["deno", "run", "--allow-net=127.0.0.1,[::1]", "--allow-env", "--allow-read=/etc/tunnelmux,/run/secrets", "daemon/main.ts", "healthcheck"]

# tini as PID 1: it forwards SIGTERM/SIGHUP to the daemon (which drains and reloads on them) and
# reaps zombies. Narrow permissions: network, environment (the TUNNELMUX_* layer reads it all),
# reading the data, config and secrets directories, writing only the data directory. No
# --allow-sys, --allow-run or --allow-ffi: the daemon needs none.
ENTRYPOINT ["/tini", "--", "deno", "run", "--v8-flags=--max-semi-space-size=2", "--allow-net", "--allow-env", "--allow-read=/data,/etc/tunnelmux,/run/secrets", "--allow-write=/data", "daemon/main.ts"]
CMD ["run"]
