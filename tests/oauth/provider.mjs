// A real OAuth 2.1 / OpenID authorization server for the tests: oidc-provider (npm), nobody here wrote it.
// Configured as an MCP server's authorization server is: dynamic client registration (RFC 7591), PKCE S256
// required, resource indicators (RFC 8707) giving JWT access tokens for each resource named, refresh tokens
// (offline_access), revocation (RFC 7009), the `iss` on the authorization response (RFC 9207), and its own
// development login and consent pages (any login name; the person types it, Chromium here).
//
// node tests/oauth/provider.mjs PORT RESOURCE[,RESOURCE…] [ACCESS_TTL_SECONDS]  (the first is the default)
// Prints "ready ISSUER" on stdout once it listens on 127.0.0.1:PORT; stops on SIGTERM or when stdin closes.
import Provider from 'oidc-provider';

const [port, resourceList, ttl] = process.argv.slice(2);
const resources = resourceList.split(',');
const issuer = `http://127.0.0.1:${port}`;
const accessTtl = Number(ttl || 3600);
const SCOPE = 'notes:read notes:write';

const provider = new Provider(issuer, {
  clients: [],
  scopes: ['openid', 'offline_access'],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resources[0],
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (!resources.includes(indicator)) throw new Error(`unknown resource ${indicator}`);
        return { scope: SCOPE, audience: indicator, accessTokenTTL: accessTtl, accessTokenFormat: 'jwt',
                 jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
  pkce: { required: () => true },
  // every login is consented at once after the login page: the test types a name, the server asks no more
  loadExistingGrant: async (ctx) => {
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId,
                                                accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope('openid offline_access');
    for (const resource of resources) grant.addResourceScope(resource, SCOPE);
    await grant.save();
    return grant;
  },
  ttl: { AccessToken: accessTtl, RefreshToken: 86400, Session: 86400, Grant: 86400 },
  rotateRefreshToken: false,
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id, name: id }) }),
  claims: { openid: ['sub', 'name'] },
});
provider.proxy = false;

const server = provider.listen(Number(port), '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
