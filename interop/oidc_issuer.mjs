// A real OAuth 2.1 / OpenID Connect authorization server for moat's resource-server tests:
// oidc-provider on loopback, with two users (alice in ops, bob in dev), two clients (client-a
// signs its tokens RS256, client-b EdDSA), one resource indicator (RESOURCE, JWT access
// tokens with `aud` = it), client_credentials, introspection, and a test grant that issues a
// user's access token without a browser (grant_type urn:moat:test:user, username=...).
//
// Test-only routes: POST /_test/rotate puts a new signing key of each kind first (rsa-N,
// ed-N; the old ones stay published, as an issuer rotating keys does); POST /_test/jwks-down makes the
// JWKS answer 503 until POST /_test/jwks-up.
//
// A second resource (DOWNSTREAM, optional) is a server behind a gateway at RESOURCE: the
// gateway's client (moat-gateway, secret-gw, client_secret_basic) exchanges a user's token
// for RESOURCE for one for DOWNSTREAM (RFC 8693 token exchange, registered with
// registerGrantType: the subject token is verified against this issuer's own keys, its
// audience must be RESOURCE, and the new token keeps its user), and gets client_credentials
// tokens for DOWNSTREAM of its own.
//
// With CALLBACK too, a gateway that brokers each user's authorization to DOWNSTREAM: client
// moat-broker (secret-broker) with the authorization code grant (PKCE) and that redirect
// URI. The login is a test route, no form: the authorization endpoint sends the browser to
// /_test/interaction/UID, which signs in the user named by `?user=` (and grants what the
// request asked) when the browser comes back with it.
//
// moat-broker gets refresh tokens, rotated on each use (an old one used again is refused and
// revokes the grant, as oidc-provider does). With MOAT_TEST_DOWNSTREAM_TTL=SECONDS, the
// access tokens of users for DOWNSTREAM (authorization code and refresh grants) live that
// long. GET /_test/grants lists each token request: grant type, the refresh token presented
// (if any), the refresh token issued (if any), or the error.
//
// With MOAT_TEST_CONSOLE_CALLBACK=URI, a web console signing people in (OpenID Connect):
// client moat-console (secret-console, client_secret_basic) with the authorization code
// grant and that redirect URI, no resource indicator, and ID tokens that carry the user's
// `groups` when the scope `groups` is asked for. Its login goes through the same test route.
//
// Prints one JSON line once listening: {"issuer": "http://127.0.0.1:PORT"}.
// Usage: node oidc_issuer.mjs RESOURCE [DOWNSTREAM [CALLBACK]]

import http from 'node:http';
import { generateKeyPair, exportJWK, createLocalJWKSet, jwtVerify } from 'jose';
import Provider from 'oidc-provider';

const RESOURCE = process.argv[2];
const DOWNSTREAM = process.argv[3];
const CALLBACK = process.argv[4];
if (!RESOURCE) {
  console.error('usage: node oidc_issuer.mjs RESOURCE [DOWNSTREAM]');
  process.exit(2);
}
const RESOURCES = DOWNSTREAM ? [RESOURCE, DOWNSTREAM] : [RESOURCE];
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const USERS = { alice: { groups: ['ops'] }, bob: { groups: ['dev'] } };
const SCOPES = ['mcp:tools', 'db:write'];
const TEST_GRANT = 'urn:moat:test:user';
const DOWNSTREAM_TTL = Number(process.env.MOAT_TEST_DOWNSTREAM_TTL || 0);
const CONSOLE_CALLBACK = process.env.MOAT_TEST_CONSOLE_CALLBACK;

async function keyPair(alg, kid) {
  const { privateKey } = await generateKeyPair(alg, { extractable: true, crv: alg === 'EdDSA' ? 'Ed25519' : undefined });
  return { ...(await exportJWK(privateKey)), kid, alg, use: 'sig' };
}

async function makeProvider(issuer, keys) {
  const provider = new Provider(issuer, {
    clients: [
      { client_id: 'client-a', client_secret: 'secret-a', grant_types: ['client_credentials', TEST_GRANT], response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_post' },
      { client_id: 'client-b', client_secret: 'secret-b', grant_types: ['client_credentials', TEST_GRANT], response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_post' },
      // A gateway in front of DOWNSTREAM: token exchange, and tokens of its own.
      { client_id: 'moat-gateway', client_secret: 'secret-gw', grant_types: ['client_credentials', TOKEN_EXCHANGE], response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic' },
      ...(CONSOLE_CALLBACK ? [{ client_id: 'moat-console', client_secret: 'secret-console', grant_types: ['authorization_code'], response_types: ['code'], redirect_uris: [CONSOLE_CALLBACK], token_endpoint_auth_method: 'client_secret_basic' }] : []),
      ...(CALLBACK ? [{ client_id: 'moat-broker', client_secret: 'secret-broker', grant_types: ['authorization_code', 'refresh_token', 'client_credentials'], response_types: ['code'], redirect_uris: [CALLBACK], token_endpoint_auth_method: 'client_secret_basic' }] : []),
      // The resource server itself, for introspection.
      { client_id: 'moat-rs', client_secret: 'secret-rs', grant_types: [], response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic' },
    ],
    jwks: { keys },
    scopes: SCOPES,
    // The console's ID tokens name the user's groups (scope `groups`), in the code flow too.
    ...(CONSOLE_CALLBACK ? { claims: { openid: ['sub'], groups: ['groups'] }, conformIdTokenClaims: false } : {}),
    issueRefreshToken: async (ctx, client) => client.clientId === 'moat-broker' && client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: () => true,
    interactions: { url: (ctx, interaction) => `/_test/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // The console signs people in; it asks for no resource.
        defaultResource: (ctx, client) => (client?.clientId === 'moat-console' ? undefined : RESOURCE),
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, client) => {
          if (!RESOURCES.includes(resource)) {
            throw new Provider.errors.InvalidTarget();
          }
          return {
            scope: SCOPES.join(' '),
            audience: resource,
            accessTokenFormat: 'jwt',
            accessTokenTTL: resource === DOWNSTREAM && DOWNSTREAM_TTL
              && ['authorization_code', 'refresh_token'].includes(ctx.oidc.params?.grant_type)
              ? DOWNSTREAM_TTL : 600,
            jwt: { sign: { alg: client.clientId === 'client-b' ? 'EdDSA' : 'RS256' } },
          };
        },
      },
    },
    findAccount: (ctx, id) => (USERS[id] ? {
      accountId: id,
      claims: () => ({ sub: id, ...(CONSOLE_CALLBACK ? { groups: USERS[id].groups } : {}) }),
    } : undefined),
    extraTokenClaims: (ctx, token) => (token.accountId && USERS[token.accountId]
      ? { groups: USERS[token.accountId].groups } : undefined),
  });
  provider.on('grant.success', (ctx) => {
    grants.push({ grant_type: ctx.oidc.params.grant_type, presented: ctx.oidc.params.refresh_token,
      issued: ctx.body?.refresh_token });
  });
  provider.on('grant.error', (ctx, err) => {
    grants.push({ grant_type: ctx.oidc.params?.grant_type, presented: ctx.oidc.params?.refresh_token,
      error: `${err.error}: ${err.error_description}` });
  });
  provider.registerGrantType(TEST_GRANT, async (ctx) => {
    const { client, params } = ctx.oidc;
    const accountId = params.username;
    if (!USERS[accountId]) {
      throw new Provider.errors.InvalidGrant('unknown user');
    }
    const resource = params.resource || RESOURCE;
    if (resource !== RESOURCE) {
      throw new Provider.errors.InvalidTarget();
    }
    const scope = (params.scope || 'mcp:tools').split(' ').filter((s) => SCOPES.includes(s)).join(' ');
    const grant = new provider.Grant({ accountId, clientId: client.clientId });
    grant.addResourceScope(resource, scope);
    const grantId = await grant.save();
    const token = new provider.AccessToken({ accountId, client, grantId, gty: TEST_GRANT, scope });
    token.resourceServer = new provider.ResourceServer(resource, {
      scope: SCOPES.join(' '),
      audience: resource,
      accessTokenFormat: 'jwt',
      accessTokenTTL: 600,
      jwt: { sign: { alg: client.clientId === 'client-b' ? 'EdDSA' : 'RS256' } },
    });
    const value = await token.save();
    ctx.body = { access_token: value, token_type: 'Bearer', expires_in: token.expiration, scope };
  }, ['username', 'scope', 'resource'], ['resource']);
  provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
    const { client, params } = ctx.oidc;
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
      throw new Provider.errors.InvalidRequest('subject_token_type must be an access token');
    }
    if (!DOWNSTREAM || params.resource !== DOWNSTREAM) {
      throw new Provider.errors.InvalidTarget();
    }
    let claims;
    try {
      const publicKeys = keys.map(({ d, p, q, dp, dq, qi, ...pub }) => pub);
      ({ payload: claims } = await jwtVerify(params.subject_token, createLocalJWKSet({ keys: publicKeys }), {
        issuer, audience: RESOURCE,
      }));
    } catch (e) {
      throw new Provider.errors.InvalidGrant(`subject token: ${e.message}`);
    }
    const accountId = claims.sub;
    if (!USERS[accountId]) {
      throw new Provider.errors.InvalidGrant('the subject token names no user');
    }
    exchanges.push({ client: client.clientId, sub: accountId, resource: params.resource });
    const scope = (params.scope || '').split(' ').filter((s) => SCOPES.includes(s)).join(' ');
    const grant = new provider.Grant({ accountId, clientId: client.clientId });
    grant.addResourceScope(DOWNSTREAM, scope);
    const grantId = await grant.save();
    const token = new provider.AccessToken({ accountId, client, grantId, gty: 'token-exchange', scope });
    token.resourceServer = new provider.ResourceServer(DOWNSTREAM, {
      scope: SCOPES.join(' '),
      audience: DOWNSTREAM,
      accessTokenFormat: 'jwt',
      accessTokenTTL: 600,
      jwt: { sign: { alg: 'RS256' } },
    });
    const value = await token.save();
    ctx.body = {
      access_token: value, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer',
      expires_in: token.expiration, scope,
    };
  }, ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope'], ['resource']);
  return provider;
}

const server = http.createServer();
let active;
let jwksDown = false;
// Every token exchange made: GET /_test/exchanges lists them.
const exchanges = [];
// Every token request: GET /_test/grants lists them.
const grants = [];
let rotations = 1;
server.on('request', async (req, res) => {
  if (req.method === 'GET' && req.url === '/_test/exchanges') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(exchanges));
    return;
  }
  if (req.method === 'GET' && req.url === '/_test/grants') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(grants));
    return;
  }
  if (req.method === 'POST' && req.url.startsWith('/_test/')) {
    if (req.url === '/_test/rotate') {
      rotations += 1;
      keys.unshift(await keyPair('RS256', `rsa-${rotations}`), await keyPair('EdDSA', `ed-${rotations}`));
      active = await makeProvider(issuer, [...keys]);
    } else if (req.url === '/_test/jwks-down') {
      jwksDown = true;
    } else if (req.url === '/_test/jwks-up') {
      jwksDown = false;
    }
    res.writeHead(204).end();
    return;
  }
  if (req.method === 'GET' && req.url.startsWith('/_test/interaction/')) {
    try {
      const user = new URL(req.url, issuer).searchParams.get('user');
      if (!USERS[user]) {
        res.writeHead(400).end('name a user: ?user=');
        return;
      }
      const details = await active.interactionDetails(req, res);
      const { params } = details;
      const grant = new active.Grant({ accountId: user, clientId: params.client_id });
      if (params.resource) {
        grant.addResourceScope(params.resource, params.scope || '');
      }
      if (params.scope) {
        // This provider's own scopes (SCOPES) count as OpenID scopes too.
        grant.addOIDCScope(params.scope);
      }
      const grantId = await grant.save();
      await active.interactionFinished(req, res, { login: { accountId: user }, consent: { grantId } },
        { mergeWithLastSubmission: false });
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
    return;
  }
  if (jwksDown && req.url.startsWith('/jwks')) {
    res.writeHead(503).end();
    return;
  }
  active.callback()(req, res);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
const keys = [await keyPair('RS256', 'rsa-1'), await keyPair('EdDSA', 'ed-1')];
active = await makeProvider(issuer, keys);
process.stdout.write(`${JSON.stringify({ issuer })}\n`);
