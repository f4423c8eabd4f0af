# The egress image: every role is `egress <role>`; docker-compose.yml picks the role per service.
FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY bin ./bin
COPY src ./src
COPY queues ./queues
COPY workers ./workers
USER node
ENTRYPOINT ["node", "/app/bin/egress.js"]
