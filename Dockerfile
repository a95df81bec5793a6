# Switchboard's container image: docs/operations.md ("Container") says how to run it.
# test/ops/container.test.ts replays the RUN and COPY steps below in a fresh directory and
# starts the result with this CMD, ENV and HEALTHCHECK, so keep every RUN step to paths under
# the stage's WORKDIR or the directories declared here (/app, /data).

# --- build: production dependencies, then src/ to plain JavaScript in dist/ ---------------
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
# npm ci runs the postinstall script (the postgres.js fix); build.mjs is esbuild, a dependency
COPY scripts/patch-postgres-js.mjs scripts/build.mjs scripts/
RUN npm ci --omit=dev --no-audit --no-fund
COPY src src
RUN node scripts/build.mjs

# --- runtime: node, the dependencies, the built files, migrations and flows ---------------
FROM node:20-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data
WORKDIR /app
# the embedded database's directory, writable by the unprivileged user (node's, uid 1000)
RUN mkdir -p /data && chown 1000:1000 /data
COPY package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY migrations migrations
COPY flows flows
# numeric, so that Kubernetes' runAsNonRoot can tell it is not root
USER 1000:1000
# PGlite's data when DATABASE_URL is unset; with DATABASE_URL nothing is written here
VOLUME /data
EXPOSE 3000
# liveness: the process answers HTTP (readiness, database included, is GET /readyz)
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself is PID 1 and handles SIGTERM (finishes in-flight requests, SHUTDOWN_TIMEOUT_MS);
# the flags are npm start's (package.json), plus source maps for TypeScript lines in traces
CMD ["node", "--max-semi-space-size=8", "--enable-source-maps", "dist/main.js"]
