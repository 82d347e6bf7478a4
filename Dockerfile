# syntax=docker/dockerfile:1
# The pool resource image: /opt/resource/{check,in,out,pool} are node programs (no shell wrapper,
# so the process Concourse starts and signals is the one doing the work). The runtime holds node,
# git, CA certificates and the payload: SSH is spoken in-process, so no OpenSSH client, ssh-agent,
# proxytunnel, bash scripts or jq, and no Node package manager (npm, npx, corepack, yarn). The
# Debian base system stays as it is, dpkg and apt included, so the image can be extended with
# `apt-get install`. scripts/image-check.mjs checks these promises in the built image.
#
#   docker build -t pool-resource:0.1.0 .                   builds, runs unit and end-to-end tests
#   docker build --target runtime -t pool-resource:0.1.0 .  the same image without the end-to-end run
#   npm run image                                           the same with buildah, then checks it
#
# Where TLS is intercepted, npm needs that CA: pass it as a build secret (never stored in a layer):
#   docker build --secret id=ca,src=$NODE_EXTRA_CA_CERTS -t pool-resource:0.1.0 .
#
# BASE_IMAGE names the Node image both stages start from (Debian based, with node and npm).
#
# /opt/resource is exactly what `npm run package` writes to build/resource/.

ARG NODE_VERSION=24
ARG DEBIAN_RELEASE=trixie
ARG BASE_IMAGE=node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim

# --- build: install, compile, unit tests, package -------------------------------------------
FROM ${BASE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
# No install scripts: ssh2's and cpu-features' native builds are optional (ssh2 falls back to
# pure JavaScript and the payload leaves them out), and esbuild runs from its platform package.
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
 && npm ci --ignore-scripts --no-audit --no-fund
COPY . .
RUN npm run build \
 && npx vitest run test/unit \
 && node scripts/package.mjs

# --- runtime: node, git, CA certificates and the payload ------------------------------------
FROM ${BASE_IMAGE} AS runtime
# --no-install-recommends keeps git's recommended ssh-client, less and patch out. The resource
# never installs packages, so the package managers and the shell entrypoint of the node image go:
# the official image keeps them under /usr/local; a base made from Debian's nodejs and npm
# (scripts/image.mjs) has the package npm, and corepack's program from node-corepack, which
# Debian's nodejs depends on.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && if dpkg-query -W -f '${db:Status-Abbrev}' npm 2>/dev/null | grep -q '^ii'; then \
      apt-mark manual nodejs && apt-get purge -y --auto-remove npm; fi \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx \
      /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-* \
      /usr/bin/corepack /usr/local/bin/docker-entrypoint.sh
COPY --from=build /src/build/resource/ /opt/resource/
# Node >= 22.1 keeps the code it compiles in /opt/resource/.compile-cache, where the scripts look
# for it (assets/*): each script runs once here, stopping at its usage line once it has loaded all
# it imports, so no run compiles it again (~7 ms of each start on Node 24). Node keys the cache by
# its version and the user: a run as another user, or on another node, compiles as before.
RUN mkdir /opt/resource/.compile-cache \
 && for script in check in out pool; do /opt/resource/$script </dev/null >/dev/null 2>&1 || true; done
ENTRYPOINT []
CMD ["node"]
LABEL org.opencontainers.image.title="pool-resource" \
      org.opencontainers.image.description="Concourse pool resource: locks in a git repository, stopping cleanly on every signal" \
      org.opencontainers.image.licenses="Apache-2.0"

# --- tests: the end-to-end suite against /opt/resource ---------------------------------------
FROM runtime AS tests
# The suite starts its own sshd and git daemon on 127.0.0.1 (git daemon ships with git).
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-server openssh-client \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src /src
WORKDIR /src
ENV POOL_RESOURCE_ASSETS=/opt/resource
RUN node node_modules/vitest/vitest.mjs run test/integration \
 && mkdir -m 0755 /tests-passed

# --- the image: runtime, built only once the tests stage passed -----------------------------
FROM runtime
# Copies nothing (the folder is empty); it makes the default build run the tests stage first.
COPY --from=tests /tests-passed/ /opt/resource/
