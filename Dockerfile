# The egress image: every role is `egress <role>`; docker-compose.yml picks the role per service.
# Build stage: the full dev install compiles the TypeScript (npm run build -> dist/).
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY queues ./queues
COPY workers ./workers
COPY console ./console
RUN npm run build

# Runtime stage: production dependencies and the compiled tree only (no TypeScript, no tsx, no esbuild:
# the programs the orchestrator hands out to run were bundled by `npm run build` into dist/bin/).
FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# Out of the production install, files nothing loads at run time (test/real/images.test.ts holds the size):
# - typescript, which comes with `--omit=dev` only as valibot's optional peer (devOptional in the lockfile);
# - of @google-cloud/compute, what only its main entry loads: the gcp provider imports the v1 clients
#   alone (src/providers/gcp/clients.ts), which read protos/protos.json, never protos.js, the .proto
#   sources, v1beta or v1small (46 MB);
# - bare-fs and what it alone needs: tar-fs loads them only under the Bare runtime's `bare` condition;
# - web-streams-polyfill: fetch-blob loads it only on a Node without a global ReadableStream (before 18);
# - the ES module copies of @opentelemetry/* (build/esm, build/esnext), which only bundlers read: Node
#   loads build/src (`main`, or the `default` of `exports`);
# - type declarations, TypeScript sources and source maps, which are for editors.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force \
 && rm -rf node_modules/typescript node_modules/.bin/tsc node_modules/.bin/tsserver \
 && rm -rf node_modules/@google-cloud/compute/build/protos/protos.js node_modules/@google-cloud/compute/build/protos/google node_modules/@google-cloud/compute/build/src/v1beta node_modules/@google-cloud/compute/build/src/v1small \
 && rm -rf node_modules/bare-fs node_modules/bare-path node_modules/bare-url node_modules/bare-buffer node_modules/bare-stream node_modules/web-streams-polyfill \
 && find node_modules/@opentelemetry -type d \( -path '*/build/esm' -o -path '*/build/esnext' \) -prune -exec rm -rf {} + \
 && find node_modules -type f \( -name '*.ts' -o -name '*.mts' -o -name '*.cts' -o -name '*.map' \) -delete
COPY bin ./bin
COPY --from=build /app/dist ./dist
# The worker's --data-dir (docker-compose.yml): provider state, the local proxy program.
RUN mkdir -p /var/lib/egress && chown node:node /var/lib/egress
USER node
EXPOSE 8080 9464
# The API serves /healthz on 8080; the other roles on their --metrics-port (set EGRESS_HEALTH_PORT).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:' + (process.env.EGRESS_HEALTH_PORT || '8080') + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
# tini is PID 1: it forwards SIGTERM to node (which drains its jobs) and reaps the local provider's proxy processes.
ENTRYPOINT ["tini", "--", "node", "/app/bin/egress.js"]
CMD ["--help"]
