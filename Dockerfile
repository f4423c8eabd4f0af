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
RUN npm run build

# Runtime stage: production dependencies and the compiled tree only (no TypeScript, no tsx).
FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# typescript comes with `--omit=dev` only as valibot's optional peer (devOptional in the lockfile) and
# nothing loads it at run time; type declarations, TypeScript sources and source maps are for editors.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force \
 && rm -rf node_modules/typescript node_modules/.bin/tsc node_modules/.bin/tsserver \
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
