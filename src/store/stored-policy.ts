/**
 * A policy as a user sent it (`PolicySpec`, secrets in clear) made into what a reservation stores
 * (`StoredPolicy`): passwords hashed with scrypt, webhook and OIDC client secrets sealed with the edge's
 * secret key. A secret left out of a spec keeps the one already stored (by user, webhook entry id, or
 * the OIDC block), so the API and the dashboard can change rules without sending secrets again.
 */
import { randomBytes } from 'node:crypto';
import { BurrowError } from '../errors.js';
import { isEmptySpec, type PolicySpec, type StoredPolicy, type StoredWebhook } from '../protocol/policy.js';
import { hashPassword } from './password.js';
import type { SecretBox } from './secret-box.js';

export async function storePolicy(spec: PolicySpec, previous: StoredPolicy | undefined, box: SecretBox): Promise<StoredPolicy | undefined> {
  if (isEmptySpec(spec)) return undefined;
  const stored: StoredPolicy = {};
  if (spec.basic_auth?.length) {
    stored.basicAuth = await Promise.all(
      spec.basic_auth.map(async ({ user, password }) => {
        if (password !== undefined) return { user, hash: await hashPassword(password) };
        const kept = previous?.basicAuth?.find((entry) => entry.user === user);
        if (kept === undefined) throw new BurrowError('INVALID_REQUEST', `policy.basic_auth: user "${user}" has no stored password; send "password".`);
        return kept;
      }),
    );
  }
  if (spec.basic_auth_forward === true) stored.basicAuthForward = true;
  if (spec.allow_cidr?.length) stored.allowCidr = spec.allow_cidr;
  if (spec.deny_cidr?.length) stored.denyCidr = spec.deny_cidr;
  if (spec.oidc) {
    let clientSecret: string;
    if (spec.oidc.client_secret !== undefined) clientSecret = box.seal(spec.oidc.client_secret);
    else if (previous?.oidc !== undefined) clientSecret = previous.oidc.clientSecret;
    else throw new BurrowError('INVALID_REQUEST', 'policy.oidc.client_secret is required: no client secret is stored yet.');
    stored.oidc = {
      issuer: spec.oidc.issuer,
      clientId: spec.oidc.client_id,
      clientSecret,
      allowEmail: spec.oidc.allow_email ?? [],
      allowDomain: spec.oidc.allow_domain ?? [],
    };
  }
  if (spec.verify_webhook?.length) {
    stored.webhooks = spec.verify_webhook.map((entry): StoredWebhook => {
      let secret: string;
      if (entry.secret !== undefined) secret = box.seal(entry.secret);
      else {
        const kept = previous?.webhooks?.find((hook) => hook.id === entry.id && hook.provider === entry.provider);
        if (kept === undefined) throw new BurrowError('INVALID_REQUEST', `policy.verify_webhook: no stored ${entry.provider} entry "${entry.id}"; send "secret".`);
        secret = kept.secret;
      }
      const id = entry.id ?? `wh_${randomBytes(4).toString('hex')}`;
      return { id, provider: entry.provider, secret, ...(entry.header === undefined ? {} : { header: entry.header }) };
    });
  }
  if (spec.request_header_add?.length) stored.requestHeaderAdd = spec.request_header_add.map(({ name, value }) => [name, value]);
  if (spec.request_header_remove?.length) stored.requestHeaderRemove = spec.request_header_remove;
  if (spec.response_header_add?.length) stored.responseHeaderAdd = spec.response_header_add.map(({ name, value }) => [name, value]);
  if (spec.response_header_remove?.length) stored.responseHeaderRemove = spec.response_header_remove;
  if (spec.rate_limit) stored.rateLimit = { requests: spec.rate_limit.requests, periodSeconds: spec.rate_limit.period_seconds };
  return stored;
}

/**
 * The same policy with every sealed secret sealed again under the box's current key (a key rotation).
 * Throws when a secret does not open with any key the box holds.
 */
export function resealPolicy(stored: StoredPolicy, box: SecretBox, subdomain: string): StoredPolicy {
  const reseal = (sealed: string): string => {
    const plain = box.open(sealed);
    if (plain === null) throw new BurrowError('INTERNAL_ERROR', `A secret of the policy of "${subdomain}" does not open with any key in ${box.path}.`);
    return box.seal(plain);
  };
  return {
    ...stored,
    ...(stored.oidc === undefined ? {} : { oidc: { ...stored.oidc, clientSecret: reseal(stored.oidc.clientSecret) } }),
    ...(stored.webhooks === undefined ? {} : { webhooks: stored.webhooks.map((hook) => ({ ...hook, secret: reseal(hook.secret) })) }),
  };
}

/** Every sealed value of a policy (to check which key each names). */
export function sealedSecretsOf(stored: StoredPolicy): string[] {
  return [...(stored.oidc === undefined ? [] : [stored.oidc.clientSecret]), ...(stored.webhooks ?? []).map((hook) => hook.secret)];
}
