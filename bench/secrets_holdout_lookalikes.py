"""The look-alikes of the held-out secret corpus (``bench/secrets_holdout.py``).

Benign texts that memories really hold and that resemble secrets: hashes and ids, base64 of
text, paths and names, colours and versions, placeholders and references, prose and config
about credentials, public keys and certificates, URLs without credentials. Written, like the
secrets, before the detector's rules were read; random parts come from the caller's seeded
generator, so the file holds only shapes.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.secrets_holdout import Gen


def lookalikes(g: Gen) -> list[tuple[str, str]]:
    """(kind, text) of each benign look-alike: what memories really hold that resembles a
    secret (digests, ids, base64 of text, names, placeholders, prose, public keys)."""
    sha = g.hex(40)
    return [
        # --- hashes and ids --------------------------------------------------------------
        ("git-sha", f"fixed in commit {sha}"),
        ("git-sha-short", f"reverted {g.hex(7)} and {g.hex(7)}; the bug came from {g.hex(12)}"),
        ("git-log", f"commit {g.hex(40)}\nAuthor: Dana <dana@example.com>\nDate:   Tue Mar 4 2025"),
        ("git-range", f"git diff {g.hex(40)}..{g.hex(40)} -- src/"),
        ("uuid", f"request id {g.uuid()} failed with 502"),
        ("uuid-list", f"tenants {g.uuid()}, {g.uuid()} and {g.uuid()} were migrated"),
        ("uuid-json", json.dumps({"id": g.uuid(), "parent_id": g.uuid(), "name": "invoice"})),
        ("npm-integrity", f"\"integrity\": \"sha512-{g.raw_b64(64)}\""),
        ("npm-integrity-sha1", f"\"integrity\": \"sha1-{g.raw_b64(20)}\""),
        ("pip-hash", f"requests==2.32.3 \\\n    --hash=sha256:{g.hex(64)}"),
        ("cargo-checksum", f"[[package]]\nname = \"serde\"\nversion = \"1.0.203\"\nchecksum ="
                           f" \"{g.hex(64)}\""),
        ("go-sum", f"golang.org/x/net v0.25.0 h1:{g.raw_b64(32)}"),
        ("yarn-lock", f"lodash@^4.17.21:\n  resolved \"https://registry.yarnpkg.com/lodash/-/loda"
                      f"sh-4.17.21.tgz"
                      f"#{g.hex(40)}\"\n  integrity sha512-{g.raw_b64(64)}"),
        ("docker-digest", f"image: nginx@sha256:{g.hex(64)}"),
        ("docker-pull", f"Digest: sha256:{g.hex(64)}\nStatus: Downloaded newer image for python:3"
                        f".12-slim"),
        ("git-lfs-pointer", f"version https://git-lfs.github.com/spec/v1\noid sha256:{g.hex(64)}"
                            f"\nsize 1048576"),
        ("md5sum", f"{g.hex(32)}  release-1.4.0.tar.gz"),
        ("sha256sum", f"{g.hex(64)}  memdir-0.9.0-py3-none-any.whl"),
        ("trace-id", f"trace_id={g.hex(32)} span_id={g.hex(16)} took 840ms"),
        ("etag", f"ETag: \"{g.hex(40)}\""),
        ("s3-request-id", f"x-amz-request-id: {g.upper_alnum(16)}\nx-amz-id-2: {g.raw_b64(60)}"),
        ("gpg-fingerprint", f"pub   rsa4096 2023-01-02 [SC]\n      {g.hex(40).upper()}\nuid  Rele"
                            f"ase Bot"),
        ("ssh-fingerprint", f"ED25519 key fingerprint is SHA256:{g.raw_b64(32).rstrip('=')}."),
        ("nix-store", f"/nix/store/{g.chars('0123456789abcdfghijklmnpqrsvwxyz', 32)}-python3-3.12"
                      f".4/bin/python"),
        ("ipfs-cid", f"pinned bafybei{g.chars('abcdefghijklmnopqrstuvwxyz234567', 52)}"),
        ("ulid", f"order 01{g.chars('0123456789ABCDEFGHJKMNPQRSTVWXYZ', 24)} shipped"),
        ("mongo-objectid", f"db.users.find({{_id: ObjectId(\"{g.hex(24)}\")}})"),
        ("webpack-chunk", f"dist/assets/index-{g.hex(8)}.js  142.3 kB, vendor.{g.hex(20)}.js"),
        ("cloudfront-id", f"CloudFront distribution E{g.upper_alnum(13)} invalidated"),
        ("google-doc-url", f"design doc: https://docs.google.com/document/d/1{g.urlsafe(43)}/edit"),
        ("youtube", f"recording: https://www.youtube.com/watch?v={g.urlsafe(11)}"),
        ("stripe-object-ids", f"customer cus_{g.alnum(14)} paid invoice in_{g.alnum(24)} via pi"
                              f"_{g.alnum(24)}"),
        ("stripe-publishable", f"STRIPE_PUBLISHABLE_KEY=pk_test_51{g.alnum(97)}"),
        ("terraform-lineage", f"\"lineage\": \"{g.uuid()}\",\n\"serial\": 412"),
        ("k8s-uid", f"uid: {g.uuid()}\nresourceVersion: \"{g.digits(8)}\""),
        ("tsid", f"job run {g.digits(18)} finished"),
        # --- base64 of non-secret things -------------------------------------------------
        ("base64-hello", f"echo -n 'hello world' | base64 gives"
                         f" {base64.b64encode(b'hello world').decode()}"),
        ("base64-json", "header is " + base64.b64encode(json.dumps(
            {"region": "eu-west-1", "retries": 3, "feature": "dark-mode"}).encode()).decode()),
        ("data-uri", f"background: url(data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAA"
                     f"Q{g.raw_b64(90)});"),
        ("k8s-configmap-b64", "kind: ConfigMap\nbinaryData:\n  logo.svg: " + base64.b64encode(
            b"<svg xmlns='http://www.w3.org/2000/svg' width='16' height='16'><circle r='8'/></svg"
            b">").decode()),
        # --- names and paths -------------------------------------------------------------
        ("long-path", "/home/dana/projects/acme-platform/services/billing-api/src/main/java/io/ac"
                      "me/"
                      "billing/invoices/InvoiceReconciliationService.java"),
        ("node-modules-path", "node_modules/@typescript-eslint/eslint-plugin/dist/rules/"
                              "no-unnecessary-type-assertion.js:42"),
        ("branch-sk", "git checkout -b sk-live-migration-followups"),
        ("branch-ghp", "the ghp_pages_redirect branch deploys docs"),
        ("branch-ticket", "merged feature/sk-proj-settings-page and fix/ghs-webhook-retry"),
        ("k8s-pod", f"kubectl logs web-{g.hex(9)}-{g.lower_alnum(5)} -n prod"),
        ("k8s-pods-list", f"api-{g.hex(10)}-{g.lower_alnum(5)}   1/1  Running\n"
                          f"worker-{g.hex(9)}-{g.lower_alnum(5)}  1/1  Running"),
        ("aws-arn", f"arn:aws:iam::{g.digits(12)}:role/github-actions-deploy"),
        ("aws-account", f"prod account is {g.digits(12)}, staging is {g.digits(12)}"),
        ("aws-arn-secret", f"arn:aws:secretsmanager:eu-west-1:{g.digits(12)}:secret:prod/db"
                           f"-{g.alnum(6)}"),
        ("aws-example-key", "AWS docs use AKIAIOSFODNN7EXAMPLE as the access key id"),
        ("aws-example-pair", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
                             "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        ("aws-instance-id", f"instance i-{g.hex(17)} in subnet-{g.hex(17)} behind sg-{g.hex(17)}"),
        ("s3-url", f"s3://acme-artifacts/builds/{g.hex(40)}/app.tar.gz"),
        # --- colours, versions, times ----------------------------------------------------
        ("css-colour", "primary: #1e293b; accent: #f97316; muted: #94a3b8"),
        ("hex-colour-list", "palette = ['#" + "', '#".join(g.hex(6) for _ in range(10)) + "']"),
        ("semver", "bumped to 2.14.0-rc.3+build.5521, then 2.14.0"),
        ("iso-timestamp", "deploy started 2025-03-04T17:22:05.123456Z, done 2025-03-04T17:31:40+0"
                          "0:00"),
        ("ip-port", "the service listens on 10.0.3.12:8443 and ::1:9090"),
        # --- placeholders ----------------------------------------------------------------
        ("placeholder-angle", "curl -H \"Authorization: Bearer <token>\" https://api.example.com"),
        ("placeholder-xxx", "API_KEY=xxx"),
        ("placeholder-x-token", "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"),
        ("placeholder-stars", "password: ****"),
        ("placeholder-stars-long", "STRIPE_SECRET_KEY=sk_live_************************"),
        ("placeholder-shell-var", "DATABASE_URL=postgres://${DB_USER}:${DB_PASSWORD}@db:5432/app"),
        ("placeholder-secret-var", "export API_TOKEN=${SECRET}"),
        ("placeholder-helm", "password: {{ .Values.password }}"),
        ("placeholder-gha", "token: ${{ secrets.NPM_TOKEN }}"),
        ("placeholder-getenv", "api_key = os.getenv(\"API_KEY\")"),
        ("placeholder-environ", "password = os.environ[\"DB_PASSWORD\"]"),
        ("placeholder-process-env", "const stripe = new Stripe(process.env.STRIPE_KEY);"),
        ("placeholder-your-key", "OPENAI_API_KEY=your-api-key-here"),
        ("placeholder-mongo", "mongodb+srv://<username>:<password>@cluster0.example.mongodb.net/"),
        ("placeholder-cmd-subst", "export GITHUB_TOKEN=$(gh auth token)"),
        ("placeholder-bearer-var", "curl -H \"Authorization: Bearer $TOKEN\" https://api.example."
                                   "com"),
        ("placeholder-empty-env", "# .env.example\nSTRIPE_KEY=\nSENDGRID_API_KEY=\nDATABASE_URL="),
        ("placeholder-redacted", "the key was sk-ant-...redacted... in the log"),
        ("placeholder-vault-ref", "password: vault:secret/data/prod/db#password"),
        ("placeholder-k8s-ref", "env:\n- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n"
                                "      name: db-creds\n      key: password"),
        # --- prose and config about secrets ----------------------------------------------
        ("prose-rotate", "rotate the password monthly and never reuse the last five"),
        ("prose-expires", "the token expires after 1 hour, refresh it with the refresh token"),
        ("prose-vault", "password: see 1Password vault 'infra'"),
        ("prose-ask", "the API key lives in Doppler (project billing, config prd), ask ops for ac"
                      "cess"),
        ("prose-secret-manager", "DB credentials come from AWS Secrets Manager at start-up"),
        ("config-min-length", "password_min_length = 12\npassword_require_symbol = true"),
        ("config-token-limit", "token_limit: 4096\nmax_tokens=512\ntemperature: 0.2"),
        ("config-secret-santa", "secret_santa: draw names on Friday"),
        ("config-key-value", "# YAML is key: value\nkey: value\nname: example"),
        ("config-token-ttl", "TOKEN_TTL=3600\nSESSION_COOKIE_SECURE=true\nPASSWORD_HASHER=argon2"),
        ("config-key-path", "ssl_certificate_key /etc/nginx/certs/privkey.pem;"),
        ("config-flag", "use the --token flag or set MEMDIR_TOKEN_FILE=~/.config/memdir/token"),
        ("config-auth-type", "auth:\n  type: oauth2\n  token_url: https://auth.example.com/oauth/"
                             "token"),
        ("config-password-file", "POSTGRES_PASSWORD_FILE=/run/secrets/postgres_password"),
        # --- public keys and certificates -----------------------------------------------
        ("ssh-ed25519-pub", f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.raw_b64(32).rstrip('=')} da"
                            f"na@laptop"),
        ("ssh-rsa-pub", f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{g.raw_b64(380).rstrip('=')} ci@b"
                        f"uild"),
        ("authorized-keys", f"# authorized_keys\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"
                            f"{g.raw_b64(32).rstrip('=')} deploy"),
        ("pem-public", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8"
                       "A" + g.pem_body(240)
                       + "\n-----END PUBLIC KEY-----"),
        ("pem-certificate", "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE" + g.pem_body(700)
                            + "\n-----END CERTIFICATE-----"),
        ("pgp-public", "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGV" + g.pem_body(500)
                       + "\n-----END PGP PUBLIC KEY BLOCK-----"),
        # --- URLs without credentials ----------------------------------------------------
        ("db-url-no-password", "DATABASE_URL=postgresql://localhost/mydb"),
        ("redis-local", "REDIS_URL=redis://localhost:6379/0"),
        ("url-with-user-only", "git clone ssh://git@github.com/acme/infra.git"),
        ("url-query", f"https://shop.example.com/cart?session_ref=checkout&page=2&sort=price&utm_"
                      f"id={g.digits(9)}"),
    ]
