"""The labelled corpus of the secret benchmark: fake but format-valid secrets, and look-alikes.

Every secret is built here at run time from its issuer's prefix and random characters drawn
from a seeded generator, so the corpus is the same on every run and the repository holds no
string a secret scanner would take for a live key. Each entry is one line as a developer might
paste it (an env file, YAML, JSON, a command, a sentence), labelled with the provider whose
format it has. The look-alikes are what memories really contain and must stay storable:
paths, branch names, git SHAs, UUIDs, lockfile hashes, placeholders, references to
environment variables and prose about credentials.

``changeme``, ``********`` and ``<your-api-key>`` count as placeholders (look-alikes): they
are the documented defaults and blanks of config templates, not credentials.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

__all__ = ["Entry", "corpus"]

SEED = 20261127


@dataclass(frozen=True)
class Entry:
    provider: str  # the issuer whose format a secret has; "benign" for a look-alike
    text: str
    secret: bool


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def alnum(self, n: int) -> str:
        return self.pick(string.ascii_letters + string.digits, n)

    def upper(self, n: int) -> str:
        return self.pick(string.ascii_uppercase + string.digits, n)

    def lower(self, n: int) -> str:
        return self.pick(string.ascii_lowercase + string.digits, n)

    def hex(self, n: int) -> str:
        return self.pick("0123456789abcdef", n)

    def digits(self, n: int) -> str:
        return self.pick(string.digits, n)

    def b64url(self, n: int) -> str:
        return self.pick(string.ascii_letters + string.digits + "-_", n)

    def b64(self, n: int) -> str:
        return self.pick(string.ascii_letters + string.digits + "+/", n)

    def password(self, n: int = 14) -> str:
        chars = string.ascii_letters + string.digits + "!#%^*+-_"
        while True:
            value = self.pick(chars, n)
            if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
                return value

    def uuid(self) -> str:
        h = self.hex(32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def _jwt(g: _Gen) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return (f"{part({'alg': 'HS256', 'typ': 'JWT'})}."
            f"{part({'sub': g.digits(8), 'iat': 1700000000, 'role': 'admin'})}.{g.b64url(43)}")


def _secrets(g: _Gen) -> list[tuple[str, str]]:
    """(provider, text) pairs; each call to ``g`` is one fresh random part."""
    pem_body = "\n".join(g.b64(64) for _ in range(3))
    basic = base64.b64encode(f"deploy:{g.password()}".encode()).decode()
    return [
        ("aws", f"AWS access key AKIA{g.upper(16)} belongs to the ci user"),
        ("aws", f"aws_access_key_id = ASIA{g.upper(16)}"),
        ("aws", f"aws_secret_access_key = {g.b64(40)}"),
        ("aws", f"export AWS_SECRET_ACCESS_KEY={g.b64(40)}"),
        ("aws", f'"SecretAccessKey": "{g.b64(40)}"'),
        ("github", f"my token is ghp_{g.alnum(36)}"),
        ("github", f"GH_TOKEN=gho_{g.alnum(36)}"),
        ("github", f"the app uses ghs_{g.alnum(36)} for checks"),
        ("github", f"github_pat_{g.alnum(22)}_{g.alnum(59)}"),
        ("gitlab", f"CI uses glpat-{g.b64url(20)} to push"),
        ("gitlab", f"runner token glrt-{g.b64url(20)}"),
        ("slack", f"SLACK_BOT_TOKEN=xoxb-{g.digits(12)}-{g.digits(13)}-{g.alnum(24)}"),
        ("slack", f"user token xoxp-{g.digits(12)}-{g.digits(12)}-{g.digits(13)}-{g.hex(32)}"),
        ("slack", f"SLACK_APP_TOKEN=xapp-1-A{g.upper(10)}-{g.digits(13)}-{g.hex(64)}"),
        ("slack", f"alerts go to https://hooks.slack.com/services/T{g.upper(8)}/B{g.upper(10)}/"
                  f"{g.alnum(24)}"),
        ("stripe", f"STRIPE_SECRET_KEY=sk_live_{g.alnum(24)}"),
        ("stripe", f"restricted key rk_live_{g.alnum(24)}"),
        ("stripe", f"webhook signing secret whsec_{g.alnum(32)}"),
        ("openai", f"OPENAI_API_KEY=sk-proj-{g.b64url(74)}T3BlbkFJ{g.b64url(74)}"),
        ("openai", f"use sk-{g.alnum(20)}T3BlbkFJ{g.alnum(20)} for the embeddings"),
        ("anthropic", f"ANTHROPIC_API_KEY=sk-ant-api03-{g.b64url(93)}AA"),
        ("anthropic", f"key sk-ant-admin01-{g.b64url(93)}AA for the org"),
        ("google", f"maps key AIza{g.b64url(35)}"),
        ("google", f'"client_secret": "GOCSPX-{g.b64url(28)}"'),
        ("google", f"access token ya29.{g.b64url(120)}"),
        ("jwt", f"session cookie {_jwt(g)}"),
        ("jwt", f"Authorization: Bearer {_jwt(g)}"),
        ("private-key",
         f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"),
        ("private-key", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{pem_body}"),
        ("private-key", f'"private_key": "-----BEGIN PRIVATE KEY-----\\n{g.b64(64)}\\n"'),
        ("password", f"DB_PASSWORD={g.password()}"),
        ("password", f"POSTGRES_PASSWORD: {g.password()}"),
        ("password", f"MYSQL_ROOT_PASSWORD={g.password(16)}"),
        ("password", f"password: {g.password()}"),
        ("password", f'"password": "{g.password()}"'),
        ("password", f"the admin password is {g.password()}"),
        ("password", f"mysqldump --password={g.password()} app > dump.sql"),
        ("password", f"SMTP_PASS={g.password()}"),
        ("password", f"spring.datasource.password={g.password()}"),
        ("password", f"pwd = '{g.password()}'"),
        ("url-credentials", f"DATABASE_URL=postgres://app:{g.password()}@db.internal:5432/app"),
        ("url-credentials", f"redis://:{g.alnum(20)}@cache.internal:6379/0"),
        ("url-credentials", f"mongodb+srv://admin:{g.alnum(16)}@cluster0.mongodb.net/prod"),
        ("url-credentials", f"amqp://guest:{g.alnum(12)}@mq:5672/"),
        ("url-credentials", f"git clone https://oauth2:{g.alnum(20)}@gitlab.example.com/app.git"),
        ("basic-auth", f"Authorization: Basic {basic}"),
        ("basic-auth", f"curl -u deploy:{g.password()} https://ci.internal/api"),
        ("bearer", f"Authorization: Bearer {g.alnum(40)}"),
        ("bearer", f"curl -H 'Authorization: Bearer {g.b64url(48)}' https://api.internal"),
        ("azure", "DefaultEndpointsProtocol=https;AccountName=prodlogs;AccountKey="
                  f"{g.b64(86)}==;EndpointSuffix=core.windows.net"),
        ("azure", "Endpoint=sb://bus.servicebus.windows.net/;SharedAccessKeyName=root;"
                  f"SharedAccessKey={g.b64(43)}="),
        ("azure", f"https://acct.blob.core.windows.net/c?sv=2022-11-02&sp=r&sig={g.b64(43)}%3D"),
        ("azure", f"AZURE_CLIENT_SECRET={g.alnum(3)}8Q~{g.b64url(34)}"),
        ("npm", f"//registry.npmjs.org/:_authToken=npm_{g.alnum(36)}"),
        ("npm", f"NPM_TOKEN=npm_{g.alnum(36)}"),
        ("pypi", f"password = pypi-AgEIcHlwaS5vcmc{g.b64url(70)}"),
        ("pypi", f"TWINE_PASSWORD=pypi-AgEIcHlwaS5vcmc{g.b64url(70)}"),
        ("huggingface", f"HF_TOKEN=hf_{g.alnum(34)}"),
        ("huggingface", f"login with hf_{g.alnum(34)}"),
        ("sendgrid", f"SENDGRID_API_KEY=SG.{g.b64url(22)}.{g.b64url(43)}"),
        ("sendgrid", f"mail key SG.{g.b64url(22)}.{g.b64url(43)}"),
        ("twilio", f"TWILIO_AUTH_TOKEN={g.hex(32)}"),
        ("twilio", f"twilio api key SK{g.hex(32)}"),
        ("telegram", f"TELEGRAM_BOT_TOKEN={g.digits(10)}:AA{g.b64url(33)}"),
        ("telegram", f"bot {g.digits(9)}:AA{g.b64url(33)} posts the alerts"),
        ("discord", f"DISCORD_TOKEN=M{g.alnum(25)}.{g.b64url(6)}.{g.b64url(38)}"),
        ("discord", f"https://discord.com/api/webhooks/{g.digits(18)}/{g.b64url(68)}"),
        ("mailchimp", f"MAILCHIMP_KEY={g.hex(32)}-us6"),
        ("mailgun", f"mailgun key-{g.hex(32)}"),
        ("shopify", f"SHOPIFY_ACCESS_TOKEN=shpat_{g.hex(32)}"),
        ("digitalocean", f"doctl auth init -t dop_v1_{g.hex(64)}"),
        ("databricks", f"DATABRICKS_TOKEN=dapi{g.hex(32)}"),
        ("doppler", f"DOPPLER_TOKEN=dp.pt.{g.alnum(43)}"),
        ("dropbox", f"dropbox token sl.{g.b64url(140)}"),
        ("linear", f"LINEAR_API_KEY=lin_api_{g.alnum(40)}"),
        ("notion", f"NOTION_TOKEN=secret_{g.alnum(43)}"),
        ("notion", f"notion integration ntn_{g.alnum(46)}"),
        ("atlassian", f"JIRA_API_TOKEN=ATATT3xFfGF0{g.b64url(180)}={g.hex(8).upper()}"),
        ("postman", f"POSTMAN_API_KEY=PMAK-{g.hex(24)}-{g.hex(34)}"),
        ("sentry", f"SENTRY_AUTH_TOKEN=sntryu_{g.hex(64)}"),
        ("grafana", f"GRAFANA_TOKEN=glsa_{g.alnum(32)}_{g.hex(8)}"),
        ("grafana", f"grafana cloud glc_{g.b64(80)}=="),
        ("newrelic", f"NEW_RELIC_API_KEY=NRAK-{g.upper(27)}"),
        ("pulumi", f"PULUMI_ACCESS_TOKEN=pul-{g.hex(40)}"),
        ("terraform", f"token = \"{g.alnum(14)}.atlasv1.{g.b64url(67)}\""),
        ("vault", f"VAULT_TOKEN=hvs.{g.b64url(90)}"),
        ("alibaba", f"access key LTAI{g.alnum(20)}"),
        ("planetscale", f"pscale_tkn_{g.alnum(43)}"),
        ("supabase", f"SUPABASE_ACCESS_TOKEN=sbp_{g.hex(40)}"),
        ("supabase", f"SUPABASE_SERVICE_ROLE_KEY={_jwt(g)}"),
        ("replicate", f"REPLICATE_API_TOKEN=r8_{g.alnum(37)}"),
        ("groq", f"GROQ_API_KEY=gsk_{g.alnum(52)}"),
        ("xai", f"XAI_API_KEY=xai-{g.alnum(80)}"),
        ("perplexity", f"pplx-{g.alnum(48)}"),
        ("facebook", f"FB_ACCESS_TOKEN=EAAB{g.alnum(150)}"),
        ("square", f"SQUARE_ACCESS_TOKEN=EAAA{g.b64url(60)}"),
        ("square", f"oauth secret sq0csp-{g.b64url(43)}"),
        ("braintree", f"access_token$production${g.lower(16)}${g.hex(32)}"),
        ("heroku", f"HEROKU_API_KEY={g.uuid()}"),
        ("heroku", f"heroku token HRKU-{g.b64url(60)}"),
        ("cloudflare", f"CLOUDFLARE_API_TOKEN={g.b64url(40)}"),
        ("datadog", f"DD_API_KEY={g.hex(32)}"),
        ("okta", f"OKTA_API_TOKEN=00{g.b64url(40)}"),
        ("age", f"AGE-SECRET-KEY-1{g.pick('QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L', 58)}"),
        ("figma", f"FIGMA_TOKEN=figd_{g.b64url(40)}"),
        ("contentful", f"CONTENTFUL_MANAGEMENT_TOKEN=CFPAT-{g.b64url(43)}"),
        ("netlify", f"NETLIFY_AUTH_TOKEN=nfp_{g.alnum(40)}"),
        ("flyio", f"FLY_API_TOKEN=fo1_{g.b64url(43)}"),
        ("render", f"RENDER_API_KEY=rnd_{g.alnum(32)}"),
        ("resend", f"RESEND_API_KEY=re_{g.alnum(8)}_{g.alnum(24)}"),
        ("mapbox", f"MAPBOX_TOKEN=sk.eyJ1{g.b64url(60)}.{g.b64url(22)}"),
        ("generic", f'"apiKey": "{g.alnum(32)}"'),
        ("generic", f"api_key: {g.alnum(40)}"),
        ("generic", f"client_secret={g.b64url(40)}"),
        ("generic", f"SECRET_KEY = 'django-insecure-{g.password(50)}'"),
        ("generic", f"JWT_SECRET={g.b64(48)}"),
        ("generic", f"SESSION_SECRET: {g.hex(64)}"),
        ("generic", f"ENCRYPTION_KEY={g.b64(43)}="),
        ("generic", f"config.auth_token = \"{g.alnum(32)}\""),
        ("generic", f"accessToken: '{g.b64url(40)}'"),
        ("generic", f"$env:API_TOKEN = \"{g.alnum(32)}\""),
        ("generic", f"secret: {g.alnum(28)}"),
        ("generic", f"WEBHOOK_SIGNING_KEY={g.b64(44)}"),
        ("cli-password", f"mysql -u root -p{g.password()} app"),
        ("cli-password", f"docker login -u bob -p {g.password()} registry.internal"),
        ("password", f"PGPASSWORD={g.password()} psql -h db"),
        ("aws", f"aws configure set aws_secret_access_key {g.b64(40)}"),
        ("sentry", f"SENTRY_DSN=https://{g.hex(32)}@o{g.digits(6)}.ingest.sentry.io/{g.digits(7)}"),
        ("url-token", f"git clone https://ghp_{g.alnum(36)}@github.com/acme/app"),
        ("stripe", f"const stripe = Stripe('sk_live_{g.alnum(24)}')"),
        ("password", f"pass={g.password(10)}"),
        ("generic", f"api-key: {g.hex(32)}"),
        ("entropy", f"CI_DEPLOY_CREDS={g.b64(40)}"),
        ("entropy", f"RAILS_MASTER_KEY={g.hex(32)}"),
        # A literal under a key naming a credential, whatever its entropy (issue 28).
        ("password", f"PASSWORD={g.pick(string.ascii_lowercase, 6)}"),
        ("password", f"MYSQL_ROOT_PASSWORD={g.pick(string.ascii_lowercase, 10)}"),
        ("password", f'  db_password: "{g.pick(string.ascii_lowercase, 10)}"'),
        ("generic", f'{{"api_secret": "{g.pick(string.ascii_lowercase, 16)}"}}'),
        ("github", f"export GITHUB_TOKEN={g.pick(string.ascii_lowercase, 16)}"),
        ("basic-auth", "authorization: basic "
                       + base64.b64encode(f"ci:{g.pick(string.ascii_lowercase, 8)}".encode())
                       .decode()),
        ("airtable", f"AIRTABLE_API_KEY=pat{g.alnum(14)}.{g.hex(64)}"),
        ("airtable", f"the airtable pat{g.alnum(14)}.{g.hex(64)} reads the base"),
        ("vault", f"vault login hvs.{g.alnum(24)}"),
        ("vault", f"VAULT_TOKEN=hvb.{g.alnum(24)}"),
    ]


_BENIGN = [
    "pwd is /workspace/app2",
    "cwd: /home/dev/projects/app2/src",
    "git checkout sk-1234-fix-login",
    "branch sk-1234-fix-login-redirect was merged into main",
    "feature/token-refresh-v2 is the branch for the OAuth work",
    "JIRA-4821-rotate-keys is done",
    "password: ${DB_PASSWORD}",
    'token = os.environ["X"]',
    'api_key = os.environ.get("OPENAI_API_KEY")',
    "apiKey: process.env.STRIPE_KEY",
    "API_KEY=<your-api-key>",
    "api_key: YOUR_API_KEY",
    "password: changeme",
    "password: '********'",
    "token: xxxxxxxxxxxxxxxx",
    "set the API key in .env",
    "AWS_SECRET_ACCESS_KEY is read from the CI secret store",
    "export GITHUB_TOKEN=$(gh auth token)",
    "DATABASE_URL=postgres://${DB_USER}:${DB_PASSWORD}@db:5432/app",
    "kubectl create secret generic db --from-literal=password=$DB_PASS",
    "password = getpass.getpass()",
    "csrf token = {{ csrf_token }}",
    "client_secret: !vault |",
    "the password is rotated weekly",
    "password must be at least 12 characters",
    "Passwords are hashed with bcrypt (cost 12)",
    "the token expires after 3600 seconds",
    "rotate the secret every 90 days",
    "password is in 1Password under 'prod db'",
    "the api_key is read from os.environ['API_KEY']",
    "Use a bearer token from the auth service",
    "Authorization header uses Bearer tokens from Keycloak",
    "Basic usage: memdir store --type fact 'text'",
    "token_type: bearer",
    "AWS_REGION=eu-west-1",
    "PASSWORD_MIN_LENGTH=12",
    "token_ttl: 3600",
    "secret_name: prod/db/password",
    "auth_method: oauth2",
    "api_version: 2023-10-01",
    "key: value pairs in YAML",
    "primary key is (tenant_id, id)",
    "the ssh key lives in ~/.ssh/id_ed25519",
    "redis://localhost:6379/0",
    "Connect with postgres://db.internal:5432/app (no credentials in the URL)",
    "postgresql://app@localhost/app",
    "SENTRY_DSN=https://<key>@o0.ingest.sentry.io/0",
    "We use sk-learn? no: scikit-learn",
    "AKIA prefix marks AWS access keys",
    "ghp_ tokens are GitHub personal access tokens",
    "npm_config_registry=https://registry.npmjs.org/",
    "hf_hub_download(repo_id='gpt2') fetches the weights",
    "SECRET_KEY_BASE is generated by rails credentials:edit",
    "The Stripe key starts with sk_live_ (never commit it)",
    "Use AccountKey from the portal, never the connection string",
    "Telegram bot 123456789 handles the alerts",
    "password reset emails go through SendGrid",
    "encryption key rotation is handled by KMS",
    "HMAC-SHA256 with the signing key from Vault",
    "keyboard shortcut: Ctrl+K opens search",
    "monkey patch the token refresh in tests",
    "The build id is 20261127.4 (pipeline 8812)",
    "Random seed = 8675309",
    "token_count: 4096",
    "max_tokens=2048",
    "tokenizer: cl100k_base",
    "KEY_PREFIX=memdir",
    "password_policy: min12-upper1-digit1",
    "AUTH0_DOMAIN=dev-abc123.us.auth0.com",
    "API_KEY_HEADER=X-Api-Key",
    "secret_key_base: <%= ENV['SECRET_KEY_BASE'] %>",
    "KEY=${{ secrets.DEPLOY_KEY }}",
    "NEXTAUTH_SECRET=openssl rand -base64 32",
    "client_id: 1234567890-abc.apps.googleusercontent.com",
    "mysql -u root -p app",
    "docker login -u bob --password-stdin",
    "git clone git@github.com:acme/app.git",
    "https://user@bitbucket.org/acme/app.git",
    "password123 is on the banned list",
    # Look-alikes of a literal under a key naming a credential (issue 28): references,
    # placeholders, types, numbers, other nouns, prose.
    "password = var.db_password",
    "password: env.DB_PASSWORD",
    "password=$DB_PASSWORD",
    "token: {{ secrets.TOKEN }}",
    "password=<your-password>",
    "password: REDACTED",
    "password=your_password_here",
    "the password field is required",
    "rotate the token weekly",
    "token_count = 5",
    "max_tokens: 1024",
    "password_min_length = 12",
    "secret_santa = true",
    "password: SecretStr",
    "token = next_token",
    "connect(password=db_pass)",
    "First pass: dedupe the rows",
    "Secret: rotated monthly by the platform team",
    "Basic authentication is enabled in nginx",
]


def _benign(g: _Gen) -> list[str]:
    return [
        *_BENIGN,
        f"commit {g.hex(40)} fixed the flaky test",
        f"Fixed in {g.hex(7)}, see the PR",
        f"git revert {g.hex(40)}",
        f"request id {g.uuid()} timed out",
        f'user_id: "{g.uuid()}"',
        f"integrity sha512-{g.b64(86)}==",
        f'"integrity": "sha512-{g.b64(86)}=="',
        f'{{file = "app-1.0-py3-none-any.whl", hash = "sha256:{g.hex(64)}"}}',
        f'checksum = "{g.hex(64)}"',
        f"image: ghcr.io/acme/api@sha256:{g.hex(64)}",
        f"container {g.hex(64)} exited with 137",
        f"nonce = {g.hex(32)}",
        f"etag: W/\"{g.hex(4)}-{g.hex(8)}\"",
        f"pod api-{g.lower(10)}-{g.lower(5)} restarted",
        f"cache key: v1-deps-{g.hex(40)}",
        f"md5 {g.hex(32)}  dist/app.tar.gz",
        f"version: 1.{g.digits(1)}.{g.digits(2)}-beta.4",
        f"the session id was {g.uuid()}",
        f"revision: {g.hex(12)}",
        f"run /tmp/pytest-of-dev/pytest-{g.digits(3)}/test_store0 again",
    ]


def corpus(seed: int = SEED) -> list[Entry]:
    """The labelled entries: secrets first, then look-alikes; the same on every call."""
    g = _Gen(seed)
    entries = [Entry(provider, text, True) for provider, text in _secrets(g)]
    entries += [Entry("benign", text, False) for text in _benign(g)]
    return entries
