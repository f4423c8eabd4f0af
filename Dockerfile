# The egress image: every role is `egress <role>`; docker-compose.yml picks the role per service.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY bin ./bin
COPY src ./src
COPY queues ./queues
COPY workers ./workers
# The worker's --data-dir (docker-compose.yml): provider state, the local proxy program.
RUN mkdir -p /var/lib/egress && chown node:node /var/lib/egress
USER node
ENTRYPOINT ["node", "/app/bin/egress.js"]
