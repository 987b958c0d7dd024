// The policy editor of the Reserved subdomains page (docs/dashboard.md, docs/policies.md): every rule of
// one reserved name's stored policy, through GET/PUT/DELETE /api/v1/reserved-subdomains/:name/policy.
// Secrets are write-only: the API shows a stored password or secret only as "set", so the form never
// holds one; a stored user or webhook entry is kept (with its secret) while its box stays checked, and a
// secret field left empty keeps the stored one. The edge checks every field and names the one at fault.
import { api } from './api.js';
import { clear, h } from './elements.js';

/** Lines of a textarea, trimmed, empty ones dropped. */
function lines(textarea) {
  return textarea.value.split('\n').map((line) => line.trim()).filter((line) => line !== '');
}

/** A list of words: one a line or comma-separated. */
function words(textarea) {
  return lines(textarea).flatMap((line) => line.split(',')).map((word) => word.trim()).filter((word) => word !== '');
}

/** "Name: value" lines; a line without a colon goes as a name with an empty value, for the edge to refuse. */
function headerPairs(textarea) {
  return lines(textarea).map((line) => {
    const colon = line.indexOf(':');
    return colon === -1 ? { name: line, value: '' } : { name: line.slice(0, colon).trim(), value: line.slice(colon + 1).trim() };
  });
}

/** "PROVIDER:SECRET" or "hmac-sha256:HEADER:SECRET", as --verify-webhook takes them. */
function webhookEntry(line) {
  const colon = line.indexOf(':');
  const provider = (colon === -1 ? line : line.slice(0, colon)).trim().toLowerCase();
  const rest = colon === -1 ? '' : line.slice(colon + 1);
  if (provider !== 'hmac-sha256') return { provider, secret: rest };
  const second = rest.indexOf(':');
  return second === -1 ? { provider, header: rest, secret: '' } : { provider, header: rest.slice(0, second), secret: rest.slice(second + 1) };
}

/** "USER:PASSWORD" (the password may hold colons). */
function userEntry(line) {
  const colon = line.indexOf(':');
  return colon === -1 ? { user: line } : { user: line.slice(0, colon), password: line.slice(colon + 1) };
}

let fieldCount = 0;

/** A labelled control: its own id, the label's for. */
function field(labelText, control, hint) {
  const id = `policy-field-${++fieldCount}`;
  control.id = id;
  return h('div.policy-field', {}, h('label', { for: id }, labelText), control, hint === undefined ? null : h('span.muted.policy-hint', {}, hint));
}

/** A checkbox with its label after it. */
function check(labelText, box) {
  box.id = `policy-field-${++fieldCount}`;
  return h('div.policy-check', {}, box, h('label', { for: box.id }, labelText));
}

function area(placeholder, value = '') {
  const textarea = h('textarea', { rows: 2, spellcheck: 'false', autocomplete: 'off', placeholder });
  textarea.value = value;
  return textarea;
}

/**
 * Opens the editor for `subdomain` in `host` (emptied first). `onDone` runs after a save, a removal or
 * Close; `report` shows an API error; `notify` a success; `confirm` asks before the policy is removed.
 */
export async function openPolicyEditor(host, subdomain, { onDone, report, notify, confirm }) {
  const { policy } = await api('GET', `/api/v1/reserved-subdomains/${encodeURIComponent(subdomain)}/policy`);
  const path = `/api/v1/reserved-subdomains/${encodeURIComponent(subdomain)}/policy`;
  const headingId = `policy-heading-${++fieldCount}`;

  // Stored entries whose secrets stay unless unchecked.
  const keptUsers = policy.basic_auth.map((user) => ({ user: user.user, box: h('input', { type: 'checkbox', checked: true }) }));
  const keptHooks = policy.verify_webhook.map((hook) => ({ hook, box: h('input', { type: 'checkbox', checked: true }) }));
  const keptList = (entries, describe) => (entries.length === 0 ? null : h('div.policy-kept', {}, entries.map((entry) => check(describe(entry), entry.box))));

  const newUsers = area('user:password, one a line');
  const forward = h('input', { type: 'checkbox', checked: policy.basic_auth_forward });
  const allow = area('203.0.113.0/24, one a line', policy.allow_cidr.join('\n'));
  const deny = area('198.51.100.7/32, one a line', policy.deny_cidr.join('\n'));
  const newHooks = area('github:SECRET, stripe:whsec_..., hmac-sha256:HEADER:SECRET; one a line');
  const issuer = h('input', { type: 'url', autocomplete: 'off', spellcheck: 'false', placeholder: 'https://accounts.example.com', value: policy.oidc?.issuer ?? '' });
  const clientId = h('input', { autocomplete: 'off', spellcheck: 'false', value: policy.oidc?.client_id ?? '' });
  const clientSecret = h('input', { type: 'password', autocomplete: 'new-password', spellcheck: 'false', placeholder: policy.oidc === null ? '' : 'set: leave empty to keep it' });
  const allowEmail = area('ann@example.com, one a line', policy.oidc?.allow_email.join('\n') ?? '');
  const allowDomain = area('example.com, one a line', policy.oidc?.allow_domain.join('\n') ?? '');
  const requestAdd = area('Name: value, one a line', policy.request_header_add.map((pair) => `${pair.name}: ${pair.value}`).join('\n'));
  const requestRemove = area('Name, one a line', policy.request_header_remove.join('\n'));
  const responseAdd = area('Name: value, one a line', policy.response_header_add.map((pair) => `${pair.name}: ${pair.value}`).join('\n'));
  const responseRemove = area('Name, one a line', policy.response_header_remove.join('\n'));
  const rateRequests = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric', value: policy.rate_limit?.requests ?? '' });
  const ratePeriod = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric', value: policy.rate_limit?.period_seconds ?? '' });

  /** The PUT body: the API's policy shape, secrets only where typed. */
  const spec = () => {
    const body = {};
    const users = [...keptUsers.filter((entry) => entry.box.checked).map((entry) => ({ user: entry.user })), ...lines(newUsers).map(userEntry)];
    // A stored user given again with a password takes the new one.
    const byUser = new Map();
    for (const user of users) byUser.set(user.user, user.password === undefined ? byUser.get(user.user) ?? user : user);
    if (byUser.size > 0) body.basic_auth = [...byUser.values()];
    if (forward.checked) body.basic_auth_forward = true;
    if (lines(allow).length > 0) body.allow_cidr = words(allow);
    if (lines(deny).length > 0) body.deny_cidr = words(deny);
    const hooks = [
      ...keptHooks.filter((entry) => entry.box.checked).map(({ hook }) => ({ id: hook.id, provider: hook.provider, ...(hook.header === undefined ? {} : { header: hook.header }) })),
      ...lines(newHooks).map(webhookEntry),
    ];
    if (hooks.length > 0) body.verify_webhook = hooks;
    if (issuer.value.trim() !== '' || clientId.value.trim() !== '' || clientSecret.value !== '') {
      body.oidc = { issuer: issuer.value.trim(), client_id: clientId.value.trim(), allow_email: words(allowEmail), allow_domain: words(allowDomain) };
      if (clientSecret.value !== '') body.oidc.client_secret = clientSecret.value;
    }
    if (lines(requestAdd).length > 0) body.request_header_add = headerPairs(requestAdd);
    if (lines(requestRemove).length > 0) body.request_header_remove = words(requestRemove);
    if (lines(responseAdd).length > 0) body.response_header_add = headerPairs(responseAdd);
    if (lines(responseRemove).length > 0) body.response_header_remove = words(responseRemove);
    if (rateRequests.value !== '' || ratePeriod.value !== '') body.rate_limit = { requests: Number(rateRequests.value), period_seconds: Number(ratePeriod.value) };
    return body;
  };

  const save = async (event) => {
    event.preventDefault();
    try {
      await api('PUT', path, spec());
      notify(`Policy of ${subdomain} saved.`);
      await onDone();
    } catch (error) {
      report(error);
    }
  };
  const remove = async () => {
    const confirmed = await confirm({
      title: `Remove the policy of ${subdomain}?`,
      text: `Every rule goes: anyone can reach ${subdomain} again, and its stored passwords and secrets are deleted.`,
      confirmLabel: 'Remove policy',
    });
    if (!confirmed) return;
    try {
      await api('DELETE', path);
      notify(`Policy of ${subdomain} removed.`);
      await onDone();
    } catch (error) {
      report(error);
    }
  };

  const group = (legend, ...children) => h('fieldset.policy-group', {}, h('legend', {}, legend), ...children);
  const editor = h('section.policy-editor', { 'aria-labelledby': headingId },
    h('h2', { id: headingId }, `Policy of ${subdomain}`),
    h('p.muted', {}, 'Checked by the edge before anything else sees a request (docs/policies.md). Passwords and secrets are never shown: a stored one is kept while its box stays checked, or its field left empty.'),
    h('form.policy-form', { on: { submit: save } },
      group('Basic auth',
        keptList(keptUsers, (entry) => `Keep user ${entry.user} (password set)`),
        field('Add users', newUsers, 'user:password; a kept user given again gets the new password'),
        check('Forward Authorization to the local server', forward)),
      group('Client addresses',
        field('Allowed addresses', allow, 'CIDR blocks, IPv4 or IPv6; none: every address'),
        field('Denied addresses', deny, 'wins over the allowed ones')),
      group('Webhook verification',
        keptList(keptHooks, ({ hook }) => `Keep ${hook.provider}${hook.header === undefined ? '' : ` (${hook.header})`} ${hook.id} (secret set)`),
        field('Add webhook secrets', newHooks, 'refused with 401 unless one verifies; several for a key rotation')),
      group('OpenID Connect sign-in',
        field('OIDC issuer', issuer),
        field('OIDC client id', clientId),
        field('OIDC client secret', clientSecret),
        field('Allowed e-mails', allowEmail),
        field('Allowed domains', allowDomain, `the provider's redirect URI: https://${subdomain}.<domain>/.burrow/oidc/callback`)),
      group('Headers',
        field('Request headers to add', requestAdd),
        field('Request headers to remove', requestRemove),
        field('Response headers to add', responseAdd),
        field('Response headers to remove', responseRemove)),
      group('Rate limit',
        field('Requests per period', rateRequests, 'per client address'),
        field('Period in seconds', ratePeriod, '1 to 86400')),
      h('div.actions', {},
        h('button', { type: 'submit' }, 'Save policy'),
        h('button.danger', { type: 'button', on: { click: () => void remove() } }, 'Remove policy'),
        h('button', { type: 'button', on: { click: () => void onDone() } }, 'Close policy'))));
  clear(host).append(editor);
  editor.querySelector('h2').scrollIntoView?.({ block: 'nearest' });
  return editor;
}
