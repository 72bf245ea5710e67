"""Held-out secret corpus: secrets and look-alikes written before the detector's rules were read.

``bench/secrets_corpus.py`` was written alongside the rules, so its numbers are in-sample. This
corpus was written from the providers' published token formats and from what developers paste
into notes (env files, YAML, JSON, TOML, shell, curl, connection strings, prose) without looking
at ``memdir.core.secret_rules`` or ``memdir.core.secrets``; it measures how the detector
generalises.

Invariants: no live-looking key is committed. Every random part is drawn at run time from
``random.Random(seed)``, so the same seed gives the same corpus and the file holds only the
shapes. Every entry is labelled with its provider or kind and whether it is a secret.

Decisions on the ambiguous cases (documented, not guessed per string):
- A signed JWT is a bearer credential: secret, wherever it appears.
- AWS's published example keys (``AKIAIOSFODNN7EXAMPLE``, ``wJalrXUtnFEMI/K7MDENG/...EXAMPLEKEY``)
  and values made of placeholder characters (``xxxx``, ``XXXX``, ``****``, ``<token>``,
  ``${VAR}``, template expressions, environment look-ups) are not secrets.
- Public keys, certificates without a private key, publishable keys meant for browsers
  (Stripe ``pk_``) and hashes of public content are not secrets.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import string
import uuid
from dataclasses import dataclass

from bench.secrets_holdout_lookalikes import lookalikes

SEED = 20261127

_UPPER = string.ascii_uppercase
_LOWER = string.ascii_lowercase
_DIGITS = string.digits
_ALNUM = _UPPER + _LOWER + _DIGITS
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "-_"
_B32 = _UPPER + "234567"


@dataclass(frozen=True)
class Entry:
    """One labelled text: ``provider`` names the issuer or kind of a secret, or the family of
    a look-alike (the same fields as ``bench.secrets_corpus.Entry``)."""

    provider: str
    text: str
    secret: bool


class Gen:
    """Random parts of the corpus, all drawn from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def hex(self, n: int) -> str:
        return self.chars(_HEX, n)

    def alnum(self, n: int) -> str:
        return self.chars(_ALNUM, n)

    def lower_alnum(self, n: int) -> str:
        return self.chars(_LOWER + _DIGITS, n)

    def upper_alnum(self, n: int) -> str:
        return self.chars(_UPPER + _DIGITS, n)

    def urlsafe(self, n: int) -> str:
        return self.chars(_URLSAFE, n)

    def b64(self, n: int) -> str:
        return self.chars(_B64, n)

    def digits(self, n: int) -> str:
        return self.r.choice("123456789") + self.chars(_DIGITS, n - 1)

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def password(self, n: int = 16) -> str:
        """A human-made-looking strong password: letters, digits and a few symbols."""
        body = [self.r.choice(_ALNUM) for _ in range(n)]
        for _ in range(2):
            body[self.r.randrange(n)] = self.r.choice("!@#%^*-_+=")
        body[self.r.randrange(n)] = self.r.choice(_DIGITS)
        return "".join(body)

    def raw_b64(self, nbytes: int) -> str:
        return base64.b64encode(self.r.randbytes(nbytes)).decode()

    def pem_body(self, nbytes: int) -> str:
        text = self.raw_b64(nbytes)
        return "\n".join(text[i:i + 64] for i in range(0, len(text), 64))

    def checksummed(self, prefix: str, n: int) -> str:
        """GitHub/npm style: random base62 body plus a base62 CRC32 of it (6 characters)."""
        body = self.alnum(n)
        crc = binascii.crc32(body.encode())
        base62 = _DIGITS + _UPPER + _LOWER
        tail = ""
        while crc:
            crc, rem = divmod(crc, 62)
            tail = base62[rem] + tail
        return prefix + body + tail.rjust(6, "0")

    def jwt(self, claims: dict[str, object]) -> str:
        def enc(obj: object) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()) \
                .decode().rstrip("=")
        header = enc({"alg": "HS256", "typ": "JWT"})
        return f"{header}.{enc(claims)}.{self.urlsafe(43)}"


def _secrets(g: Gen) -> list[tuple[str, str]]:
    aws_id = "AKIA" + g.chars(_B32, 16)
    aws_secret = g.b64(40)
    gcp_sa = json.dumps({
        "type": "service_account",
        "project_id": "billing-prod-" + g.digits(6),
        "private_key_id": g.hex(40),
        "private_key": "-----BEGIN PRIVATE KEY-----\n" + g.pem_body(600) + "\n-----END PRIVATE KE"
                                                                           "Y-----\n",
        "client_email": "deployer@billing-prod.iam.gserviceaccount.com",
        "client_id": g.digits(21),
    }, indent=2)
    pg_pw = g.password(18)
    docker_auth = base64.b64encode(f"ci-bot:{g.password(20)}".encode()).decode()
    k8s_pw = base64.b64encode(g.password(24).encode()).decode()
    k8s_key = base64.b64encode(("sk_live_" + g.alnum(24)).encode()).decode()
    basic = base64.b64encode(f"admin:{g.password(14)}".encode()).decode()
    openssh = g.pem_body(300)
    out: list[tuple[str, str]] = [
        # --- cloud -----------------------------------------------------------------------
        ("aws-env", f"AWS_ACCESS_KEY_ID={aws_id}\nAWS_SECRET_ACCESS_KEY={aws_secret}"),
        ("aws-credentials-file", f"[prod]\naws_access_key_id = {'AKIA' + g.chars(_B32, 16)}\n"
                                 f"aws_secret_access_key = {g.b64(40)}\nregion = eu-west-1"),
        ("aws-secret-only", f"export AWS_SECRET_ACCESS_KEY=\"{g.b64(40)}\""),
        ("aws-session", f"aws_session_token = {'IQoJb3JpZ2luX2VjE' + g.b64(300)}"),
        ("aws-asia-prose", f"Temporary creds for the migration: {'ASIA' + g.chars(_B32, 16)} / "
                           f"{g.b64(40)} (expire tonight)"),
        ("aws-cli-configure", f"aws configure set aws_secret_access_key {g.b64(40)} --profile ci"),
        ("gcp-service-account", gcp_sa),
        ("gcp-api-key", f"GOOGLE_MAPS_API_KEY=AIza{g.urlsafe(35)}"),
        ("gcp-api-key-url", f"curl 'https://maps.googleapis.com/maps/api/geocode/json?address=x"
                            f"&key=AIza{g.urlsafe(35)}'"),
        ("azure-storage", f"AZURE_STORAGE_CONNECTION_STRING=\"DefaultEndpointsProtocol=https;"
                          f"AccountName=assetsprod;AccountKey={g.raw_b64(64)};"
                          f"EndpointSuffix=core.windows.net\""),
        ("azure-client-secret", f"azure:\n  tenant_id: {g.uuid()}\n  client_id: {g.uuid()}\n"
                                f"  client_secret: {g.alnum(3)}8Q~{g.urlsafe(34)}"),
        ("azure-sas", f"https://assetsprod.blob.core.windows.net/uploads?sv=2022-11-02&ss=b&srt=co"
                      f"&sp=rwdlac&se=2027-01-01T00:00:00Z&spr=https&sig"
                      f"={g.raw_b64(32).replace('+', '%2B')}"),
        ("azure-devops-pat", f"AZURE_DEVOPS_EXT_PAT={g.chars(_LOWER + '234567', 52)}"),
        ("digitalocean", f"DIGITALOCEAN_ACCESS_TOKEN=dop_v1_{g.hex(64)}"),
        ("digitalocean-oauth", f"doctl auth init -t doo_v1_{g.hex(64)}"),
        ("linode", f"LINODE_TOKEN={g.hex(64)}"),
        ("linode-cli", f"[DEFAULT]\ntoken = {g.hex(64)}\nregion = eu-central"),
        ("hetzner", f"export HCLOUD_TOKEN={g.alnum(64)}"),
        ("hetzner-tf", f'provider "hcloud" {{\n  token = "{g.alnum(64)}"\n}}'),
        ("cloudflare-token", f"CLOUDFLARE_API_TOKEN={g.urlsafe(40)}"),
        ("cloudflare-global-key", f"X-Auth-Email: ops@example.com\nX-Auth-Key: {g.hex(37)}"),
        ("fastly", f"FASTLY_API_TOKEN={g.urlsafe(32)}"),
        ("fastly-header", f"curl -H 'Fastly-Key: {g.urlsafe(32)}' https://api.fastly.com/service"),
        ("vercel", f"VERCEL_TOKEN={g.alnum(24)}"),
        ("netlify", f"NETLIFY_AUTH_TOKEN=nfp_{g.alnum(36)}"),
        ("heroku-uuid", f"HEROKU_API_KEY={g.uuid()}"),
        ("heroku-new", f"heroku token: HRKU-AA{g.urlsafe(58)}"),
        ("flyio", f"FLY_API_TOKEN=\"FlyV1 fm2_{g.b64(200)}\""),
        ("flyio-deploy", f"fly deploy --access-token fo1_{g.urlsafe(43)}"),
        # --- code hosting ----------------------------------------------------------------
        ("github-pat", f"GITHUB_TOKEN={g.checksummed('ghp_', 30)}"),
        ("github-oauth", f"gh auth login --with-token <<< {g.checksummed('gho_', 30)}"),
        ("github-app", f"installation token {g.checksummed('ghs_', 30)} (valid 1h)"),
        ("github-fine-grained", f"token: github_pat_11{g.upper_alnum(20)}_{g.alnum(59)}"),
        ("github-git-url", f"git remote set-url origin https://{g.checksummed('ghp_', 30)}"
                           f"@github.com/acme/infra.git"),
        ("gitlab-pat", f"GITLAB_TOKEN=glpat-{g.urlsafe(20)}"),
        ("gitlab-header", f"curl --header \"PRIVATE-TOKEN: glpat-{g.urlsafe(20)}\" "
                          f"https://gitlab.example.com/api/v4/projects"),
        ("gitlab-runner", f"gitlab-runner register --token glrt-{g.urlsafe(20)}"),
        ("gitlab-deploy", f"deploy token gldt-{g.urlsafe(20)} for the registry"),
        ("bitbucket-app-password", f"BITBUCKET_APP_PASSWORD=ATBB{g.alnum(28)}{g.hex(8).upper()}"),
        ("atlassian-token", f"JIRA_API_TOKEN=ATATT3xFfGF0{g.urlsafe(180)}={g.hex(8).upper()}"),
        ("jira-curl", f"curl -u dev@example.com:ATATT3xFfGF0{g.urlsafe(180)}={g.hex(8).upper()} "
                      f"https://acme.atlassian.net/rest/api/3/myself"),
        # --- SaaS ------------------------------------------------------------------------
        ("linear", f"LINEAR_API_KEY=lin_api_{g.alnum(40)}"),
        ("notion", f'notion = Client(auth="secret_{g.alnum(43)}")'),
        ("notion-new", f"NOTION_TOKEN=ntn_{g.digits(11)}{g.alnum(35)}"),
        ("asana", f"ASANA_PAT=2/{g.digits(16)}/{g.digits(16)}:{g.hex(32)}"),
        ("airtable", f"AIRTABLE_TOKEN=pat{g.alnum(14)}.{g.hex(64)}"),
        ("shopify", f"SHOPIFY_ACCESS_TOKEN=shpat_{g.hex(32)}"),
        ("shopify-shared", f"shopify:\n  api_secret: shpss_{g.hex(32)}"),
        ("square", f"SQUARE_ACCESS_TOKEN=EAAA{g.urlsafe(60)}"),
        ("square-oauth", f"square oauth secret sq0csp-{g.urlsafe(43)}"),
        ("paypal-braintree", f"BRAINTREE_TOKEN=access_token$production${g.lower_alnum(16)}"
                             f"${g.hex(32)}"),
        ("paypal-client-secret", f"PAYPAL_CLIENT_ID=A{g.urlsafe(79)}\nPAYPAL_CLIENT_SECRET="
                                 f"E{g.urlsafe(79)}"),
        ("braintree-private", f"braintree:\n  merchant_id: {g.lower_alnum(16)}\n"
                              f"  public_key: {g.lower_alnum(16)}\n  private_key: {g.hex(32)}"),
        ("stripe-live", f"STRIPE_SECRET_KEY=sk_live_51{g.alnum(97)}"),
        ("stripe-test", f"stripe.api_key = \"sk_test_51{g.alnum(97)}\""),
        ("stripe-restricted", f"use rk_live_{g.alnum(24)} for the reporting job"),
        ("stripe-webhook", f"STRIPE_WEBHOOK_SECRET=whsec_{g.alnum(32)}"),
        ("twilio", f"TWILIO_ACCOUNT_SID=AC{g.hex(32)}\nTWILIO_AUTH_TOKEN={g.hex(32)}"),
        ("twilio-api-key", f"twilio api key SK{g.hex(32)} secret {g.alnum(32)}"),
        ("sendgrid", f"SENDGRID_API_KEY=SG.{g.urlsafe(22)}.{g.urlsafe(43)}"),
        ("mailgun", f"MAILGUN_API_KEY=key-{g.hex(32)}"),
        ("mailgun-new", f"mailgun:\n  api_key: {g.hex(32)}-{g.hex(8)}-{g.hex(8)}"),
        ("mailchimp", f"MAILCHIMP_API_KEY={g.hex(32)}-us{g.r.randint(1, 21)}"),
        ("postmark", f"curl -H \"X-Postmark-Server-Token: {g.uuid()}\" https://api.postmarkapp.co"
                     f"m/email"),
        ("slack-bot", f"SLACK_BOT_TOKEN=xoxb-{g.digits(12)}-{g.digits(13)}-{g.alnum(24)}"),
        ("slack-user", f"slack user token xoxp-{g.digits(12)}-{g.digits(12)}-{g.digits(13)}"
                       f"-{g.hex(32)}"),
        ("slack-app", f"SLACK_APP_TOKEN=xapp-1-A{g.upper_alnum(10)}-{g.digits(13)}-{g.hex(64)}"),
        ("slack-webhook", f"alerts go to https://hooks.slack.com/services/T{g.upper_alnum(10)}/"
                          f"B{g.upper_alnum(10)}/{g.alnum(24)}"),
        ("discord-bot", f"DISCORD_TOKEN=M{g.alnum(25)}.{g.urlsafe(6)}.{g.urlsafe(38)}"),
        ("discord-webhook", f"https://discord.com/api/webhooks/{g.digits(19)}/{g.urlsafe(68)}"),
        ("telegram", f"TELEGRAM_BOT_TOKEN={g.digits(10)}:AA{g.urlsafe(33)}"),
        ("telegram-url", f"curl https://api.telegram.org/bot{g.digits(10)}:AA{g.urlsafe(33)}/getU"
                         f"pdates"),
        # --- AI / ML ---------------------------------------------------------------------
        ("openai-project", f"OPENAI_API_KEY=sk-proj-{g.urlsafe(74)}T3BlbkFJ{g.urlsafe(74)}"),
        ("openai-legacy", f"openai.api_key = 'sk-{g.alnum(20)}T3BlbkFJ{g.alnum(20)}'"),
        ("openai-svcacct", f"service account key sk-svcacct-{g.urlsafe(74)}T3BlbkFJ"
                           f"{g.urlsafe(74)}"),
        ("anthropic", f"ANTHROPIC_API_KEY=sk-ant-api03-{g.urlsafe(93)}AA"),
        ("anthropic-admin", f"admin key: sk-ant-admin01-{g.urlsafe(93)}AA"),
        ("cohere", f"co = cohere.Client(\"{g.alnum(40)}\")"),
        ("cohere-env", f"COHERE_API_KEY={g.alnum(40)}"),
        ("huggingface", f"HF_TOKEN=hf_{g.chars(_UPPER + _LOWER, 34)}"),
        ("huggingface-cli", f"huggingface-cli login --token hf_{g.chars(_UPPER + _LOWER, 34)}"),
        ("replicate", f"export REPLICATE_API_TOKEN=r8_{g.alnum(37)}"),
        ("groq", f"GROQ_API_KEY=gsk_{g.alnum(52)}"),
        ("mistral", f"MISTRAL_API_KEY={g.alnum(32)}"),
        ("pinecone", f"PINECONE_API_KEY=pcsk_{g.alnum(5)}_{g.alnum(64)}"),
        ("pinecone-legacy", f"pinecone.init(api_key=\"{g.uuid()}\", environment=\"us-west1-gcp\")"),
        ("supabase-service", "SUPABASE_SERVICE_ROLE_KEY=" + g.jwt(
            {"iss": "supabase", "ref": g.lower_alnum(20), "role": "service_role", "iat": 1700000000,
             "exp": 2015576000})),
        ("supabase-access", f"SUPABASE_ACCESS_TOKEN=sbp_{g.hex(40)}"),
        ("firebase-fcm", f"FCM_SERVER_KEY=AAAA{g.urlsafe(7)}:APA91b{g.urlsafe(134)}"),
        # --- observability / ops ---------------------------------------------------------
        ("sentry-dsn", f"SENTRY_DSN=https://{g.hex(32)}@o{g.digits(6)}.ingest.sentry.io"
                       f"/{g.digits(7)}"),
        ("sentry-auth", f"SENTRY_AUTH_TOKEN=sntrys_{g.raw_b64(120).rstrip('=')}_{g.urlsafe(43)}"),
        ("sentry-user", f"sentry-cli --auth-token sntryu_{g.hex(64)} releases list"),
        ("datadog", f"DD_API_KEY={g.hex(32)}\nDD_APP_KEY={g.hex(40)}"),
        ("datadog-yaml", f"datadog:\n  apiKey: {g.hex(32)}\n  site: datadoghq.eu"),
        ("newrelic-user", f"NEW_RELIC_API_KEY=NRAK-{g.upper_alnum(27)}"),
        ("newrelic-license", f"license_key: {g.hex(36)}NRAL"),
        ("grafana-cloud", f"GRAFANA_CLOUD_TOKEN=glc_{g.raw_b64(120).rstrip('=')}"),
        ("grafana-sa", f"grafana service account token glsa_{g.alnum(32)}_{g.hex(8)}"),
        ("pagerduty", f"PAGERDUTY_TOKEN=u+{g.urlsafe(18)}"),
        ("pagerduty-header", f"curl -H 'Authorization: Token token={g.urlsafe(20)}' "
                             f"https://api.pagerduty.com/incidents"),
        ("okta", f"curl -H \"Authorization: SSWS 00{g.urlsafe(40)}\" https://acme.okta.com/api/v1"
                 f"/users"),
        ("auth0", f"AUTH0_CLIENT_ID={g.alnum(32)}\nAUTH0_CLIENT_SECRET={g.urlsafe(64)}"),
        ("doppler", f"DOPPLER_TOKEN=dp.st.prd.{g.alnum(43)}"),
        ("doppler-personal", f"doppler configure set token dp.pt.{g.alnum(43)}"),
        ("1password-sa", f"OP_SERVICE_ACCOUNT_TOKEN=ops_eyJ{g.b64(300)}"),
        ("1password-connect", "OP_CONNECT_TOKEN=" + g.jwt(
            {"aud": ["com.1password.connect"], "sub": g.lower_alnum(26), "iat": 1700000000})),
        ("vault", f"VAULT_TOKEN=hvs.{g.urlsafe(24)}"),
        ("vault-long", f"vault login hvs.CAESI{g.urlsafe(90)}"),
        ("vault-batch", f"batch token hvb.AAAAAQ{g.urlsafe(130)}"),
        ("vault-legacy", f"export VAULT_TOKEN=s.{g.alnum(24)}"),
        # --- package registries ----------------------------------------------------------
        ("npm", f"NPM_TOKEN={g.checksummed('npm_', 30)}"),
        ("npmrc", f"//registry.npmjs.org/:_authToken={g.checksummed('npm_', 30)}\nalways-auth=tru"
                  f"e"),
        ("npmrc-legacy", f"//npm.pkg.github.com/:_authToken={g.checksummed('ghp_', 30)}"),
        ("npmrc-auth", f"_auth={base64.b64encode(f'deploy:{g.password(16)}'.encode()).decode()}\n"
                       f"registry=https://nexus.example.com/repository/npm/"),
        ("pypirc", f"[pypi]\n  username = __token__\n  password = pypi-AgEIcHlwaS5vcm"
                   f"c{g.urlsafe(150)}"),
        ("pypi-twine", f"TWINE_PASSWORD=pypi-AgEIcHlwaS5vcmc{g.urlsafe(150)}"),
        ("rubygems", f"---\n:rubygems_api_key: rubygems_{g.hex(48)}"),
        ("nuget", f"dotnet nuget push app.nupkg --api-key oy2{g.lower_alnum(43)} "
                  f"--source https://api.nuget.org/v3/index.json"),
        ("dockerhub", f"echo dckr_pat_{g.urlsafe(27)} | docker login -u acme --password-stdin"),
        ("docker-config", json.dumps({"auths": {"https://index.docker.io/v1"
                                                "/": {"auth": docker_auth}}},
                                     indent=2)),
        # --- keys ------------------------------------------------------------------------
        ("openssh-private", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU"
                            "AAAAEbm9uZQ"
                            + openssh + "\n-----END OPENSSH PRIVATE KEY-----"),
        ("rsa-private", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + g.pem_body(900)
                        + "\n-----END RSA PRIVATE KEY-----"),
        ("ec-private", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI" + g.pem_body(90)
                       + "\n-----END EC PRIVATE KEY-----"),
        ("pgp-private", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQVYBGV" + g.pem_body(700)
                        + "\n=" + g.b64(4) + "\n-----END PGP PRIVATE KEY BLOCK-----"),
        ("pem-bundle", "server.pem:\n-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgI"
                       "E" + g.pem_body(500)
                       + "\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN"
                       + g.pem_body(900) + "\n-----END PRIVATE KEY-----"),
        ("encrypted-private", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0w"
                              + g.pem_body(800) + "\n-----END ENCRYPTED PRIVATE KEY-----"),
        ("private-key-escaped", "PRIVATE_KEY=\"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN"
                                + g.raw_b64(600) + "\\n-----END PRIVATE KEY-----\\n\""),
        # --- databases and URLs ----------------------------------------------------------
        ("postgres-url", f"DATABASE_URL=postgres://app:{pg_pw}@db.internal:5432/app"),
        ("postgres-url-prose", f"connect with postgresql://report_ro:{g.alnum(20)}@10.0.3.12/anal"
                               f"ytics "
                               f"for the monthly export"),
        ("mysql-url", f"mysql://root:{g.password(14)}@127.0.0.1:3306/shop"),
        ("mongodb-srv", f"MONGO_URI=mongodb+srv://svc-api:{g.alnum(16)}@cluster0.{g.lower_alnum(5)}"
                        f".mongodb.net/prod?retryWrites=true&w=majority"),
        ("redis-url", f"REDIS_URL=redis://:{g.alnum(32)}@cache.internal:6379/0"),
        ("rediss-url", f"rediss://default:{g.alnum(32)}@eu1-cache.upstash.io:6379"),
        ("amqp-url", f"CELERY_BROKER_URL=amqp://worker:{g.password(16)}@rabbit:5672/vhost"),
        ("jdbc-postgres", f"spring.datasource.url=jdbc:postgresql://db:5432/app?user=app&password"
                          f"={g.password(14)}"),
        ("jdbc-sqlserver", f"jdbc:sqlserver://sql.example.com:1433;databaseName=erp;user=sa;passw"
                           f"ord={g.password(16)};"),
        ("spring-password", f"spring.datasource.password={g.password(18)}"),
        ("ldap-bind", f"ldapsearch -x -H ldaps://ldap.example.com -D \"cn=admin,dc=example,dc=co"
                      f"m\" "
                      f"-w '{g.password(15)}' -b dc=example,dc=com"),
        ("ldap-yaml", f"ldap:\n  bind_dn: cn=svc-gitlab,ou=services,dc=acme,dc=io\n"
                      f"  bind_password: \"{g.password(20)}\""),
        ("basic-auth-url", f"pip install --index-url https://deploy:{g.alnum(20)}@pypi.internal.a"
                           f"cme.io/simple app"),
        ("basic-auth-git", f"git clone https://jenkins:{g.password(18)}@git.acme.io/platform/api."
                           f"git"),
        # --- headers and commands --------------------------------------------------------
        ("bearer-curl", f"curl -H \"Authorization: Bearer {g.urlsafe(40)}\" https://api.acme.io/v"
                        f"2/orders"),
        ("basic-header", f"Authorization: Basic {basic}"),
        ("curl-user", f"curl -u admin:{g.password(16)} https://jenkins.acme.io/api/json"),
        ("x-api-key", f"curl -H 'x-api-key: {g.alnum(40)}' https://api.vendor.com/v1/items"),
        ("jwt-bearer", "Authorization: Bearer " + g.jwt(
            {"sub": g.uuid(), "email": "dev@acme.io", "iat": 1700000000, "exp": 1700003600})),
        ("mysql-cli", f"mysql -h db.acme.io -u root -p'{g.password(14)}' shop"),
        ("pgpassword", f"PGPASSWORD='{g.password(16)}' psql -h db.acme.io -U app app"),
        ("sshpass", f"sshpass -p '{g.password(14)}' ssh deploy@10.0.0.5"),
        ("htpasswd", f"htpasswd -b -c .htpasswd admin '{g.password(14)}'"),
        ("docker-run-env", f"docker run -e POSTGRES_PASSWORD={g.password(20)} -p 5432:5432 postgr"
                           f"es:15"),
        # --- structured config ---------------------------------------------------------
        ("k8s-secret", f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-creds\ntype: Opaque\n"
                       f"data:\n  username: YXBw\n  password: {k8s_pw}"),
        ("k8s-secret-key", f"kind: Secret\ndata:\n  STRIPE_KEY: {k8s_key}"),
        ("k8s-stringdata", f"kind: Secret\nstringData:\n  api-token: {g.alnum(40)}"),
        ("json-confi"
         "g", json.dumps({"database": {"host": "db", "user": "app", "password": g.password(18)},
                                    "port": 8080}, indent=2)),
        ("json-api-key", json.dumps({"apiKey": g.alnum(32), "endpoint": "https://api.example.co"
                                                                        "m"})),
        ("toml-config", f"[database]\nhost = \"db.internal\"\nuser = \"app\"\npassword ="
                        f" \"{g.password(18)}\""),
        ("yaml-secret", f"smtp:\n  host: smtp.acme.io\n  user: noreply\n  password:"
                        f" {g.password(16)}"),
        ("env-generic-secret", f"APP_SECRET_KEY={g.urlsafe(50)}"),
        ("django-secret", f"SECRET_KEY = 'django-insecure"
                          f"-{g.chars(_LOWER + _DIGITS + '!@#$%^&*(-_=+)', 50)}'"),
        ("rails-master-key", f"RAILS_MASTER_KEY={g.hex(32)}"),
        ("jwt-secret", f"JWT_SECRET={g.raw_b64(48)}"),
        ("encryption-key", f"ENCRYPTION_KEY=base64:{g.raw_b64(32)}"),
        ("session-cookie", f"Cookie: sessionid={g.lower_alnum(32)}; csrftoken={g.alnum(64)}"),
        ("client-secret-python", f"client_secret = \"{g.urlsafe(40)}\""),
        ("tf-vars", f"db_password = \"{g.password(20)}\""),
        ("ansible-vars", f"ansible_become_password: {g.password(14)}"),
        ("ini-password", f"[mail]\nuser=alerts\npass={g.password(16)}"),
        ("wifi-prose", f"office wifi is AcmeGuest, password {g.password(12)}"),
        # --- prose -----------------------------------------------------------------------
        ("prose-db-password", f"the staging db password is hunter2-{g.alnum(3)}!{g.alnum(2)}"),
        ("prose-admin-login", f"Admin login for Grafana: admin / {g.password(14)}"),
        ("prose-api-key", f"The vendor API key is {g.alnum(32)}, ask Sam before rotating it."),
        ("prose-token-is", f"my personal access token is {g.urlsafe(40)}"),
        ("prose-root-password", f"root password on the bastion: {g.password(16)}"),
        ("prose-pass-colon", f"Jenkins creds -> user: ci, pass: {g.password(14)}"),
        ("prose-secret-for", f"The webhook signing secret for prod is {g.alnum(32)}."),
    ]
    return out


def corpus(seed: int = SEED) -> list[Entry]:
    """Every labelled entry, secrets first; the same seed gives the same texts."""
    g = Gen(seed)
    secrets = [Entry(kind, text, True) for kind, text in _secrets(g)]
    benign = [Entry(kind, text, False) for kind, text in lookalikes(g)]
    return secrets + benign
