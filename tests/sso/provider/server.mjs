// A real OpenID provider for brickadmin's single sign-on tests: panva's oidc-provider (an
// OpenID Certified implementation: discovery, JWKS, authorization code + PKCE, RS256 ID
// tokens, userinfo, RP-initiated logout), with a small login page of its own that checks
// passwords. Started by tests/sso/conftest.py on loopback:
//
//     node server.mjs CONFIG.json
//
// CONFIG: {"issuer": "http://127.0.0.1:PORT", "port": PORT, "clients": [oidc-provider client
// metadata], "users_file": "users.json"}. users.json maps a login name to
// {"password", "sub", "email", "name", "groups"}; it is read again at every login, so a test can
// take a user out of a group between two logins. Nothing here is fetched from outside
// (no web fonts, no CDN): every page is plain HTML.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const users = () => JSON.parse(readFileSync(config.users_file, 'utf8'));
const bySub = (sub) => Object.entries(users()).find(([, u]) => u.sub === sub);

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title, body) => `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${esc(title)}</title></head>
<body><main><h1>${esc(title)}</h1>${body}</main></body></html>`;

// A fresh RS256 signing key for each run; the relying party finds it through the JWKS.
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: `test-${Date.now()}`, alg: 'RS256', use: 'sig' };

const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: { keys: [jwk] },
  cookies: { keys: ['brickadmin-test-provider-cookie-key'] },
  scopes: ['openid', 'profile', 'email', 'groups'],
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'name'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  conformIdTokenClaims: false, // the ID token carries the granted claims too, not only userinfo
  pkce: { required: () => true }, // a request without a code challenge is refused
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.body = page('Sign out of the test provider?', `${form}
          <button type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
          <button type="submit" form="op.logoutForm">No, stay signed in</button>`);
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out', '<p>You are signed out of the test provider.</p>');
      },
    },
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Provider error', `<pre id="error">${esc(JSON.stringify(out))}</pre>`);
  },
  async findAccount(ctx, sub) {
    const found = bySub(sub);
    if (!found) return undefined;
    const [login, u] = found;
    return {
      accountId: sub,
      async claims() {
        return {
          sub, preferred_username: login, name: u.name || login,
          email: u.email, email_verified: true, groups: u.groups || [],
        };
      },
    };
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { Session: 3600, Interaction: 600, Grant: 3600, IdToken: 300, AccessToken: 300, AuthorizationCode: 60 },
});
provider.proxy = false;

function loginForm(uid, error = '') {
  return page('Sign in to the test provider', `
    ${error ? `<p role="alert" id="error">${esc(error)}</p>` : ''}
    <form method="post" action="/interaction/${esc(uid)}/login">
      <label>Username <input name="username" autocomplete="username" autofocus></label>
      <label>Password <input name="password" type="password" autocomplete="current-password"></label>
      <button type="submit" id="op-submit">Sign in</button>
    </form>`);
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

function send(res, status, html) {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(html);
}

// The login and consent steps ("interactions"): the provider hands over with a redirect to
// /interaction/<uid>, this page asks for a password, and hands back with interactionFinished.
async function interaction(req, res, uid, isLoginPost) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) return send(res, 400, page('Wrong interaction', ''));
  const { prompt, params, session } = details;
  if (prompt.name === 'login') {
    if (!isLoginPost) return send(res, 200, loginForm(uid));
    const form = await readForm(req);
    const user = users()[form.get('username') || ''];
    if (!user || user.password !== form.get('password')) {
      return send(res, 200, loginForm(uid, 'Wrong username or password.'));
    }
    return provider.interactionFinished(req, res, { login: { accountId: user.sub } },
      { mergeWithLastSubmission: false });
  }
  if (prompt.name === 'consent') {
    // brickadmin is a first-party client: what it asks for is granted without a question.
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    const grantId = await grant.save();
    return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }
  return send(res, 400, page('Unknown prompt', esc(prompt.name)));
}

const callback = provider.callback();
const server = http.createServer((req, res) => {
  const m = /^\/interaction\/([^/?]+)(\/login)?(\?|$)/.exec(req.url);
  if (!m) return callback(req, res);
  interaction(req, res, m[1], Boolean(m[2]) && req.method === 'POST').catch((err) => {
    send(res, 400, page('Interaction failed', `<pre id="error">${esc(err.message)}</pre>`));
  });
});
server.listen(config.port, '127.0.0.1', () => {
  console.log(`oidc provider listening on ${config.issuer}`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
